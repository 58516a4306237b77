import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// A task of a session (Apple's `URLSessionTask`). In a background session it is a view of
/// the daemon's task, kept up to date by the session's events and progress; in a default
/// session, of the transfer in this process. Thread-safe (its state behind one lock).
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
    public var originalRequest: URLRequest? { foundationTask?.originalRequest ?? recordedRequest }
    private let requestRecord: RequestRecord
    /// Made when first asked for, not with the task: a default session's data and upload tasks
    /// answer from FoundationNetworking's task, and building a `URLRequest` took a third of
    /// what making one of them cost (issue 27). Then kept: the delivery of a background
    /// task's completion asks for it, and so do most delegates.
    private var recordedRequest: URLRequest? {
        fields.withLock { fields in
            if let made = fields.madeRequest { return made }
            let request = URLSessionTask.request(from: requestRecord)
            fields.madeRequest = .some(request)
            return request
        }
    }
    weak var backend: (any SessionBackend)?
    /// The task's state, behind one lock: each lock is objects of its own to make, and a
    /// default session makes a task object for every request (issue 27).
    private struct Fields {
        var record: TaskRecord
        var failure: Error?
        /// How the task ended is known here (`finish(with:)`): only then is it shown completed
        /// on the daemon's word (`takeReply`).
        var ended = false
        /// The daemon refused to create the task: it never had it.
        var refused = false
        var foundationTask: FoundationNetworking.URLSessionTask?
        var delegate: URLSessionTaskDelegate?
        /// Made when first asked for (most tasks' never is), then kept in step with the record.
        var progress: Progress?
        /// Set by the app or by the making of a completion-handler task; nil is the kind's default.
        var prefersIncrementalDelivery: Bool?
        /// `recordedRequest` once made (the original request never changes).
        var madeRequest: URLRequest??
        /// `response` once made, with the record it was made from: asked for again, it is the
        /// same object while the record's response is the same, as Apple's is.
        var madeResponse: (from: ResponseRecord, response: HTTPURLResponse)?
    }
    private let fields: Locked<Fields>
    /// The daemon refused to create the task: it never had it (for the stand-ins, which
    /// tell their callers that the daemon has a task; not Apple's API).
    package var wasRefusedByDaemon: Bool { fields.withLock { $0.refused } }
    /// The daemon ended the task as it was resumed, for what it found wrong when it made it (an
    /// upload's file it may not read): it never ran. For the stand-ins, as `wasRefusedByDaemon`.
    /// Known from its reply or its event, whichever comes first: both carry `pendingFailure`.
    package var wasRefusedAtResume: Bool { fields.withLock { $0.ended && $0.record.pendingFailure != nil } }

    /// `progress`, as Apple offers it: made on first use, from the byte counts so far, and
    /// kept in step with them from then on.
    public var progress: Progress {
        fields.withLock { fields in
            if let progress = fields.progress { return progress }
            let bytes = fields.record.progressBytes
            // No implicit parent: the task's progress is its own, whatever is current when it is read.
            let progress = Progress(parent: nil, userInfo: nil)
            progress.totalUnitCount = Self.total(of: bytes) ?? 0
            progress.completedUnitCount = bytes.done
            fields.progress = progress
            return progress
        }
    }

    /// A default session's data or upload task is carried out by FoundationNetworking
    /// (`ForegroundSession`): its state, response and byte counts are that task's.
    var foundationTask: FoundationNetworking.URLSessionTask? {
        get { fields.withLock { $0.foundationTask } }
        set { fields.withLock { $0.foundationTask = newValue } }
    }

    /// This task's own delegate (Apple's `URLSessionTask.delegate`): asked instead of the
    /// session's for this task's events. Honoured for default sessions' data and upload
    /// tasks; other tasks log that it is ignored.
    public var delegate: URLSessionTaskDelegate? {
        get { fields.withLock { $0.delegate } }
        set {
            let carried = fields.withLock { fields in
                fields.delegate = newValue
                return fields.foundationTask != nil
            }
            if newValue != nil, !carried, AppEnvironment.isBootstrapped {
                AppEnvironment.log.error("session", "a delegate set on task \(taskIdentifier) is ignored: only default sessions' data and upload tasks have their own", task: taskIdentifier)
            }
        }
    }

    /// Whether the response body comes to `didReceive data` as it arrives (true) or in one
    /// call once the whole of it is here, just before `didCompleteWithError` (false). Apple's
    /// default: true, but false for download tasks and for tasks made with a completion
    /// handler. Set it before `resume()`: once a body is being held back, the rest of it is
    /// held back too, so that its bytes stay in order. Honoured by the tasks this process
    /// carries out (a default session's data and upload tasks, a background session's data
    /// tasks); a background upload's answer always comes in one call.
    public var prefersIncrementalDelivery: Bool {
        get { fields.withLock { $0.prefersIncrementalDelivery } ?? !(self is URLSessionDownloadTask) }
        set { fields.withLock { $0.prefersIncrementalDelivery = newValue } }
    }

    init(record: TaskRecord, backend: (any SessionBackend)?) {
        self.taskIdentifier = record.taskIdentifier
        self.requestRecord = record.originalRequest
        self.backend = backend
        self.fields = Locked(Fields(record: record))
    }

    // MARK: Properties with Apple's names

    /// The request being carried out: the original one, moved on by redirects (S2.3).
    public var currentRequest: URLRequest? {
        if let inner = foundationTask { return inner.currentRequest }
        let record = self.record
        let request = recordedRequest
        guard var moved = request, let current = record.currentURL else { return request }
        moved.url = URL(string: current)
        return moved
    }

    /// The server's last response (an `HTTPURLResponse`), once its header has arrived.
    public var response: URLResponse? {
        if let inner = foundationTask { return inner.response }
        return fields.withLock { fields -> URLResponse? in
            guard let record = fields.record.response else { return nil }
            if let made = fields.madeResponse, made.from == record { return made.response }
            guard let url = URL(string: record.url),
                  let response = HTTPURLResponse(url: url, statusCode: record.statusCode, httpVersion: "HTTP/1.1", headerFields: record.headers) else { return nil }
            fields.madeResponse = (record, response)
            return response
        }
    }

    /// Where the task is in its life.
    public var state: State {
        let (ownState, inner) = fields.withLock { ($0.record.state, $0.foundationTask) }
        let own = State(rawValue: ownState.rawValue) ?? .completed
        // Completed once reported so, whatever FoundationNetworking's task says by then.
        if own != .completed, let inner { return State(rawValue: inner.state.rawValue) ?? .completed }
        return own
    }
    /// Why the task ended, once it ended with an error (a `URLError` with Apple's code).
    public var error: Error? { fields.withLock { $0.failure } }
    /// Body bytes received so far (for a resumed download, counting the bytes it resumed from).
    public var countOfBytesReceived: Int64 { max(foundationTask?.countOfBytesReceived ?? 0, fields.withLock { $0.record.countOfBytesReceived }) }
    /// The body's length from `Content-Length`, or -1 when unknown.
    public var countOfBytesExpectedToReceive: Int64 { foundationTask?.countOfBytesExpectedToReceive ?? fields.withLock { $0.record.countOfBytesExpectedToReceive } }
    /// Request body bytes sent so far.
    public var countOfBytesSent: Int64 { foundationTask?.countOfBytesSent ?? fields.withLock { $0.record.countOfBytesSent } }
    /// The request body's length, or -1 when unknown.
    public var countOfBytesExpectedToSend: Int64 { foundationTask?.countOfBytesExpectedToSend ?? fields.withLock { $0.record.countOfBytesExpectedToSend } }

    /// The app's own string, persisted by the daemon, never interpreted.
    public var taskDescription: String? {
        get { fields.withLock { $0.record.taskDescription } }
        set { change { $0.taskDescription = newValue } }
    }

    /// Not before this date (background sessions only, S5); set it before `resume()`. When it
    /// comes, the delegate is asked `willBeginDelayedRequest` (S5.1).
    public var earliestBeginDate: Date? {
        get { fields.withLock { $0.record.earliestBeginDate } }
        // A date no JSON number can carry (NaN, infinite) is no date.
        set { change { $0.earliestBeginDate = newValue.flatMap { $0.timeIntervalSinceReferenceDate.isFinite ? $0 : nil } } }
    }

    /// 0…1 (`URLSessionTask.lowPriority`, `.defaultPriority`, `.highPriority`): among tasks
    /// waiting for a connection, higher priorities start first.
    public var priority: Float {
        get { fields.withLock { $0.record.priority } }
        set { change { $0.priority = CheckedNumbers.priority(newValue) } } // NaN is the default
    }

    /// A scheduling hint: how many bytes the app expects to send (-1 when unknown); kept, and
    /// shown by `bgtransfer inspect`.
    public var countOfBytesClientExpectsToSend: Int64 {
        get { fields.withLock { $0.record.countOfBytesClientExpectsToSend } }
        set { change { $0.countOfBytesClientExpectsToSend = newValue } }
    }

    /// A scheduling hint: how many bytes the app expects to receive (-1 when unknown); kept,
    /// and shown by `bgtransfer inspect`.
    public var countOfBytesClientExpectsToReceive: Int64 {
        get { fields.withLock { $0.record.countOfBytesClientExpectsToReceive } }
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
        fields.withLock { body(&$0.record) }
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

    var record: TaskRecord { fields.withLock { $0.record } }

    func update(_ record: TaskRecord) {
        update(record, keepingRequests: false)
    }

    /// `keepingRequests`: the record's requests lack their header fields (an event's compact
    /// task, `TaskRecord.forEvent`): the ones this task holds, for the same URL, are kept.
    func update(_ record: TaskRecord, keepingRequests: Bool) {
        let progress = fields.withLock { fields in
            let held = fields.record
            fields.record = record
            if keepingRequests {
                if held.originalRequest.url == record.originalRequest.url {
                    fields.record.originalRequest = held.originalRequest
                }
                if let replacement = held.replacementRequest, replacement.url == record.replacementRequest?.url {
                    fields.record.replacementRequest = replacement
                }
            }
            return fields.progress
        }
        progress.map { Self.update($0, to: record.progressBytes) }
    }

    func update(_ progress: TaskProgress) {
        let (bytes, made) = fields.withLock { fields -> ((done: Int64, expected: Int64), Progress?) in
            if fields.record.kind == .upload {
                fields.record.countOfBytesSent = progress.totalBytesSent
                fields.record.countOfBytesExpectedToSend = progress.totalBytesExpectedToSend
            } else {
                fields.record.countOfBytesReceived = progress.totalBytesWritten
                fields.record.countOfBytesExpectedToReceive = progress.totalBytesExpectedToWrite
            }
            fields.record.state = progress.state
            if let url = progress.currentURL { fields.record.currentURL = url }
            if let response = progress.response { fields.record.response = response }
            return (fields.record.progressBytes, fields.progress)
        }
        made.map { Self.update($0, to: bytes) }
    }

    /// Takes the state and byte counts of a `getAllTasks` summary when the snapshot is of the
    /// record the summary is of (the same revision); false when the record itself is needed.
    func update(_ summary: TaskSummary) -> Bool {
        let taken = fields.withLock { fields -> (bytes: (done: Int64, expected: Int64), progress: Progress?)? in
            guard fields.record.revision == summary.revision else { return nil }
            fields.record.take(summary)
            return (fields.record.progressBytes, fields.progress)
        }
        guard let taken else { return false }
        taken.progress.map { Self.update($0, to: taken.bytes) }
        return true
    }

    /// Body bytes a default session's data task received (FoundationNetworking counts none).
    func noteReceived(_ count: Int64) {
        let (bytes, made) = fields.withLock { fields in
            fields.record.countOfBytesReceived += count
            return (fields.record.progressBytes, fields.progress)
        }
        made.map { Self.update($0, to: bytes) }
    }

    /// Body bytes a default session's upload task sent, as FoundationNetworking's
    /// `didSendBodyData` tells them (its task does not tell ours): `progress` counts them.
    /// `expected` 0 is corelibs' word for a stream's unknown length.
    func noteSent(_ total: Int64, of expected: Int64) {
        let (bytes, made) = fields.withLock { fields in
            fields.record.countOfBytesSent = max(fields.record.countOfBytesSent, total)
            fields.record.countOfBytesExpectedToSend = expected > 0 ? expected : -1
            return (fields.record.progressBytes, fields.progress)
        }
        made.map { Self.update($0, to: bytes) }
    }

    func setState(_ state: TaskState) {
        fields.withLock { $0.record.state = state }
    }

    func finish(with error: Error?) {
        fields.withLock {
            $0.failure = error
            $0.ended = true
        }
    }

    /// The task as a background daemon's reply has it. A task the daemon ended is shown
    /// completed only with its end known: from the failure the record carries (a resume the
    /// daemon refused, `pendingFailure`), else once its event is delivered; until then it
    /// keeps its state. `flush` never shows a completed task without its error (issue 44), and
    /// a reply that comes after the end is known does not take the task back.
    func takeReply(_ record: TaskRecord) {
        var record = record
        let known = fields.withLock { fields -> Bool in
            if fields.ended {
                record.state = fields.record.state
                return true
            }
            guard record.state == .completed else { return true }
            if let failure = record.pendingFailure {
                fields.failure = failure.urlError(failingURL: record.originalRequest.url, kind: record.kind)
                fields.ended = true
                return true
            }
            record.state = fields.record.state
            return false
        }
        if !known {
            let note = "task \(taskIdentifier) ended in the daemon; shown completed once its event comes"
            AppEnvironment.log.info("session", note, task: taskIdentifier)
        }
        update(record)
    }

    func noteRefusedByDaemon() {
        fields.withLock { $0.refused = true }
    }

    /// Outside the task's lock: a `Progress` tells its observers and parent as it changes.
    private static func update(_ progress: Progress, to bytes: (done: Int64, expected: Int64)) {
        if let total = total(of: bytes) { progress.totalUnitCount = total }
        progress.completedUnitCount = bytes.done
    }

    /// A `Progress`'s total for these counts: the length when known; -1 (indeterminate, as
    /// Apple's and corelibs' show it) once bytes moved without one; nil (keep) before.
    private static func total(of bytes: (done: Int64, expected: Int64)) -> Int64? {
        bytes.expected >= 0 ? bytes.expected : (bytes.done > 0 ? -1 : nil)
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
