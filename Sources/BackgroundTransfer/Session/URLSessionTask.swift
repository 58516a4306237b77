import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// A task of a session (Apple's `URLSessionTask`). In a background session it is a view of
/// the daemon's task, kept up to date by the session's events and progress; in a default
/// session, of the transfer in this process. Thread-safe (each piece of state behind a lock).
open class URLSessionTask: @unchecked Sendable {
    /// Apple's task states.
    public enum State: Int, Sendable {
        /// Resumed, and not yet ended (it may be waiting for a network or a slot).
        case running = 0
        /// Made and not yet resumed, or suspended by the app: no traffic, no timer running.
        case suspended = 1
        /// Cancelled, and its end not yet reported.
        case canceling = 2
        /// Ended: `error` says how.
        case completed = 3
    }

    /// Unique within its session only, numbered from the daemon's counter for the session (the daemon refuses a number used before), stable across relaunch (S7.1).
    public let taskIdentifier: Int
    /// The request the task was made with.
    public var originalRequest: URLRequest? { foundationTask.withLock { $0 }?.originalRequest ?? recordedRequest }
    private let requestRecord: RequestRecord
    /// Made when asked for, not with the task: a default session's data and upload tasks
    /// answer from FoundationNetworking's task, and building a `URLRequest` took a third of
    /// what making one of them cost (issue 27).
    private var recordedRequest: URLRequest? { URLSessionTask.request(from: requestRecord) }
    weak var backend: (any SessionBackend)?
    private let snapshot: Locked<TaskRecord>
    private let failure = Locked<Error?>(nil)
    /// The daemon refused to create the task: it never had it (for the stand-ins, which
    /// tell their callers that the daemon has a task; not Apple's API).
    private let refused = Locked(false)
    package var wasRefusedByDaemon: Bool { refused.withLock { $0 } }
    /// `progress`, as Apple offers it.
    public let progress: Progress
    /// A default session's data or upload task is carried out by FoundationNetworking
    /// (`ForegroundSession`): its state, response and byte counts are that task's.
    let foundationTask = Locked<FoundationNetworking.URLSessionTask?>(nil)
    private let taskDelegate = Locked<URLSessionTaskDelegate?>(nil)

    /// This task's own delegate (Apple's `URLSessionTask.delegate`): asked instead of the
    /// session's for this task's events. Honoured for default sessions' data and upload
    /// tasks; other tasks log that it is ignored.
    public var delegate: URLSessionTaskDelegate? {
        get { taskDelegate.withLock { $0 } }
        set {
            taskDelegate.withLock { $0 = newValue }
            if newValue != nil, foundationTask.withLock({ $0 }) == nil, AppEnvironment.isBootstrapped {
                AppEnvironment.log.error("session", "a delegate set on task \(taskIdentifier) is ignored: only default sessions' data and upload tasks have their own", task: taskIdentifier)
            }
        }
    }

    init(record: TaskRecord, backend: (any SessionBackend)?) {
        self.taskIdentifier = record.taskIdentifier
        self.requestRecord = record.originalRequest
        self.backend = backend
        self.snapshot = Locked(record)
        self.progress = Progress(totalUnitCount: max(record.progressBytes.expected, 0))
        self.progress.completedUnitCount = record.progressBytes.done
    }

    // MARK: Properties with Apple's names

    /// The request being carried out: the original one, moved on by redirects (S2.3).
    public var currentRequest: URLRequest? {
        if let inner = foundationTask.withLock({ $0 }) { return inner.currentRequest }
        let record = snapshot.withLock { $0 }
        let request = recordedRequest
        guard var moved = request, let current = record.currentURL else { return request }
        moved.url = URL(string: current)
        return moved
    }

    /// The server's last response (an `HTTPURLResponse`), once its header has arrived.
    public var response: URLResponse? {
        if let inner = foundationTask.withLock({ $0 }) { return inner.response }
        guard let response = snapshot.withLock({ $0.response }), let url = URL(string: response.url) else { return nil }
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1", headerFields: response.headers)
    }

    /// Where the task is in its life.
    public var state: State {
        let own = State(rawValue: snapshot.withLock { $0.state.rawValue }) ?? .completed
        // Completed once reported so, whatever FoundationNetworking's task says by then.
        if own != .completed, let inner = foundationTask.withLock({ $0 }) { return State(rawValue: inner.state.rawValue) ?? .completed }
        return own
    }
    /// Why the task ended, once it ended with an error (a `URLError` with Apple's code).
    public var error: Error? { failure.withLock { $0 } }
    /// Body bytes received so far (for a resumed download, counting the bytes it resumed from).
    public var countOfBytesReceived: Int64 { max(foundationTask.withLock { $0 }?.countOfBytesReceived ?? 0, snapshot.withLock { $0.countOfBytesReceived }) }
    /// The body's length from `Content-Length`, or -1 when unknown.
    public var countOfBytesExpectedToReceive: Int64 { foundationTask.withLock { $0 }?.countOfBytesExpectedToReceive ?? snapshot.withLock { $0.countOfBytesExpectedToReceive } }
    /// Request body bytes sent so far.
    public var countOfBytesSent: Int64 { foundationTask.withLock { $0 }?.countOfBytesSent ?? snapshot.withLock { $0.countOfBytesSent } }
    /// The request body's length, or -1 when unknown.
    public var countOfBytesExpectedToSend: Int64 { foundationTask.withLock { $0 }?.countOfBytesExpectedToSend ?? snapshot.withLock { $0.countOfBytesExpectedToSend } }

    /// The app's own string, persisted by the daemon, never interpreted.
    public var taskDescription: String? {
        get { snapshot.withLock { $0.taskDescription } }
        set { change { $0.taskDescription = newValue } }
    }

    /// Not before this date (background sessions only, S5); set it before `resume()`. When it
    /// comes, the delegate is asked `willBeginDelayedRequest` (S5.1).
    public var earliestBeginDate: Date? {
        get { snapshot.withLock { $0.earliestBeginDate } }
        // A date no JSON number can carry (NaN, infinite) is no date.
        set { change { $0.earliestBeginDate = newValue.flatMap { $0.timeIntervalSinceReferenceDate.isFinite ? $0 : nil } } }
    }

    /// 0…1 (`URLSessionTask.lowPriority`, `.defaultPriority`, `.highPriority`): among tasks
    /// waiting for a connection, higher priorities start first.
    public var priority: Float {
        get { snapshot.withLock { $0.priority } }
        set { change { $0.priority = CheckedNumbers.priority(newValue) } } // NaN is the default
    }

    /// A scheduling hint: how many bytes the app expects to send (-1 when unknown); kept, and
    /// shown by `bgtransfer inspect`.
    public var countOfBytesClientExpectsToSend: Int64 {
        get { snapshot.withLock { $0.countOfBytesClientExpectsToSend } }
        set { change { $0.countOfBytesClientExpectsToSend = newValue } }
    }

    /// A scheduling hint: how many bytes the app expects to receive (-1 when unknown); kept,
    /// and shown by `bgtransfer inspect`.
    public var countOfBytesClientExpectsToReceive: Int64 {
        get { snapshot.withLock { $0.countOfBytesClientExpectsToReceive } }
        set { change { $0.countOfBytesClientExpectsToReceive = newValue } }
    }

    /// The priority a task has unless the app sets one.
    public static let defaultPriority: Float = 0.5
    /// A priority below the default.
    public static let lowPriority: Float = 0.25
    /// A priority above the default.
    public static let highPriority: Float = 0.75

    /// Changes the task here, then in the daemon.
    private func change(_ body: (inout TaskRecord) -> Void) {
        snapshot.withLock { body(&$0) }
        backend?.propertiesChanged(of: self)
    }

    // MARK: Control

    /// Starts or continues the task (tasks start suspended, S2.4).
    open func resume() {
        backend?.resume(self)
    }

    /// Pauses the task: it keeps its bytes, makes no traffic and runs no timer until `resume()`.
    open func suspend() {
        backend?.suspend(self)
    }

    /// Cancels the task; the delegate gets `didCompleteWithError` with -999.
    open func cancel() {
        backend?.cancel(self)
    }

    // MARK: Updates from the session

    var record: TaskRecord { snapshot.withLock { $0 } }

    func update(_ record: TaskRecord) {
        snapshot.withLock { $0 = record }
        updateProgress(received: record.progressBytes.done, expected: record.progressBytes.expected)
    }

    func update(_ progress: TaskProgress) {
        let bytes = snapshot.withLock { record -> (done: Int64, expected: Int64) in
            if record.kind == .upload {
                record.countOfBytesSent = progress.totalBytesSent
                record.countOfBytesExpectedToSend = progress.totalBytesExpectedToSend
            } else {
                record.countOfBytesReceived = progress.totalBytesWritten
                record.countOfBytesExpectedToReceive = progress.totalBytesExpectedToWrite
            }
            record.state = progress.state
            if let url = progress.currentURL { record.currentURL = url }
            if let response = progress.response { record.response = response }
            return record.progressBytes
        }
        updateProgress(received: bytes.done, expected: bytes.expected)
    }

    /// Takes the state and byte counts of a `getAllTasks` summary when the snapshot is of the
    /// record the summary is of (the same revision); false when the record itself is needed.
    func update(_ summary: TaskSummary) -> Bool {
        let bytes = snapshot.withLock { record -> (done: Int64, expected: Int64)? in
            guard record.revision == summary.revision else { return nil }
            record.state = summary.state
            record.countOfBytesReceived = summary.countOfBytesReceived
            record.countOfBytesExpectedToReceive = summary.countOfBytesExpectedToReceive
            record.countOfBytesSent = summary.countOfBytesSent
            record.countOfBytesExpectedToSend = summary.countOfBytesExpectedToSend
            return record.progressBytes
        }
        guard let bytes else { return false }
        updateProgress(received: bytes.done, expected: bytes.expected)
        return true
    }

    /// Body bytes a default session's data task received (FoundationNetworking counts none).
    func noteReceived(_ count: Int64) {
        snapshot.withLock { $0.countOfBytesReceived += count }
    }

    func setState(_ state: TaskState) {
        snapshot.withLock { $0.state = state }
    }

    func finish(with error: Error?) {
        failure.withLock { $0 = error }
    }

    func noteRefusedByDaemon() {
        refused.withLock { $0 = true }
    }

    private func updateProgress(received: Int64, expected: Int64) {
        if expected >= 0 { progress.totalUnitCount = expected }
        progress.completedUnitCount = received
    }

    static func request(from record: RequestRecord) -> URLRequest? {
        guard let url = URL(string: record.url) else { return nil }
        var request = URLRequest(url: url)
        request.httpMethod = record.httpMethod
        for header in record.headers { request.addValue(header.value, forHTTPHeaderField: header.name) }
        if let timeout = record.timeoutInterval { request.timeoutInterval = timeout }
        return request
    }
}

extension URLSessionTask {
    /// Cancels in the daemon and hands `completionHandler` the resume data, or nil, on
    /// another thread; the delegate still gets `didCompleteWithError` with -999.
    func cancelProducingResumeData(_ completionHandler: @escaping @Sendable (Data?) -> Void) {
        guard let backend else {
            completionHandler(nil)
            return
        }
        DispatchQueue.global().async {
            completionHandler(backend.cancel(self, produceResumeData: true))
        }
    }
}

/// A download task (Apple's `URLSessionDownloadTask`).
open class URLSessionDownloadTask: URLSessionTask, @unchecked Sendable {
    /// Cancels the download; the handler gets resume data when the download can be resumed
    /// (a GET whose server sent `ETag` or `Last-Modified` and accepts byte ranges), else nil
    /// (S6.1). The delegate still gets `didCompleteWithError` with -999.
    open func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
        cancelProducingResumeData(completionHandler)
    }
}

/// A task whose response body goes to the delegate (Apple's `URLSessionDataTask`); in a
/// background session only upload tasks are of this kind.
open class URLSessionDataTask: URLSessionTask, @unchecked Sendable {}

/// An upload task from a file (Apple's `URLSessionUploadTask`). The server's answer arrives
/// through `URLSessionDataDelegate`'s `didReceive data`, then `didCompleteWithError`.
open class URLSessionUploadTask: URLSessionDataTask, @unchecked Sendable {
    /// Cancels the upload; the handler gets resume data when the server offered resumable
    /// uploads (a `104` with `Location`, S6.6), else nil. The delegate still gets
    /// `didCompleteWithError` with -999.
    open func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
        cancelProducingResumeData(completionHandler)
    }
}
