import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// A background session (Apple's `URLSession` made from a background configuration): the
/// handle an app holds. The work is done by `transferd`; this object's `SessionCore` is
/// shared by every handle opened for the same identifier in this process (S1.3).
///
/// Import `BackgroundTransfer` (and not `FoundationNetworking` directly): this module's
/// `URLSession`, `URLSessionConfiguration` and delegate protocols then shadow Foundation's,
/// so iOS code reads the same.
open class URLSession: @unchecked Sendable {
    /// A copy of the configuration the session was made with (changing it later changes nothing).
    public let configuration: URLSessionConfiguration
    /// Where delegate calls and completion handlers run: the queue given, else a serial one
    /// the session makes (S3.5).
    public let delegateQueue: OperationQueue
    /// The app's own label for the session, never interpreted.
    public var sessionDescription: String?
    let core: (any SessionBackend)?
    /// Why this session could not be opened (ours; Apple reports it only through
    /// `didBecomeInvalidWithError`): -995, -996, a refused identifier or process. Set in
    /// `init` only.
    public private(set) var invalidationError: Error?
    /// Why this session could not be opened, as the failure tasks made on it end with.
    var invalidationFailure: TransferFailure?
    private let givenDelegate: URLSessionDelegate?
    /// Identifiers for tasks refused before any backend numbered them (a session that never opened).
    let refusedTaskNumbers = Locked(0)
    /// `defaultUserAgent`, made once (after the environment is set up) for the session's task
    /// records rather than for each task.
    let userAgent: String

    /// The delegate given when the session was made (the first one, for a background
    /// identifier opened twice in one process, S1.3).
    public var delegate: URLSessionDelegate? { core?.delegate ?? givenDelegate }

    /// The shared default session (Apple's `URLSession.shared`): no delegate, transfers in
    /// this process; for completion-handler and async tasks.
    public static let shared = URLSession(configuration: .default)

    /// A session without a delegate: a default session for completion-handler and async
    /// tasks (a background session needs a delegate, S1.2).
    public convenience init(configuration: URLSessionConfiguration) {
        self.init(configuration: configuration, delegate: nil, delegateQueue: nil)
    }

    /// Opens (or reopens) the background session named by `configuration.identifier`.
    /// Problems are reported as Apple does, by invalidating the session:
    /// `didBecomeInvalidWithError` with -995 (extension without a shared container), -996
    /// (another process holds the identifier), or a refusal naming the bad identifier.
    ///
    /// A background session needs a delegate (S1.2). As on Apple's systems, `nil` is not
    /// refused: the session opens and its tasks run. But its events (finished downloads,
    /// completions) have nobody to go to: they are acknowledged as they arrive, so that the
    /// daemon does not launch the app for them again, and are gone. The first such event
    /// prints one line on stderr naming the session (once per session), the log has it, and
    /// `bgtransfer inspect` marks the session "opened without a delegate".
    public init(configuration: URLSessionConfiguration, delegate: URLSessionDelegate?, delegateQueue queue: OperationQueue?) {
        let configuration = configuration.copy()
        let environment = AppEnvironment.current
        let log = environment.log
        userAgent = Self.defaultUserAgent
        var opened: (any SessionBackend)?
        var failure: TransferFailure?
        if configuration.identifier == nil {
            // A default session: transfers run in this process while it lives.
            let local = LocalSessionCore(configuration: configuration, delegate: delegate, delegateQueue: queue)
            self.configuration = configuration
            self.core = local
            self.delegateQueue = local.delegateQueue
            self.invalidationError = nil
            self.givenDelegate = delegate
            local.adopt(primary: self)
            return
        }
        do {
            guard let name = configuration.identifier else {
                throw TransferFailure(code: TransferFailure.requestRefused, message: "a background session needs an identifier")
            }
            let identifier: SessionIdentifier
            do { identifier = try SessionIdentifier(name) } catch {
                throw TransferFailure(code: TransferFailure.requestRefused, message: error.description, subject: name)
            }
            if delegate == nil {
                log.error("session", "a background session needs a delegate (S1.2): its events will be acknowledged "
                          + "without being delivered", session: name)
            }
            let record: SessionConfiguration
            do { record = try configuration.record() } catch {
                throw TransferFailure(code: TransferFailure.requestRefused, message: error.description, subject: error.identifier)
            }
            if environment.identity.kind == .appExtension && record.sharedContainerIdentifier == nil {
                throw TransferFailure(code: TransferFailure.backgroundSessionRequiresSharedContainer, message: "background session \(name) in app extension \(environment.identity.bundleIdentifier) needs a sharedContainerIdentifier", subject: name)
            }
            if let group = record.sharedContainerIdentifier, !environment.identity.appGroups.contains(group) {
                throw TransferFailure(code: TransferFailure.requestRefused, message: "\(environment.identity.bundleIdentifier) is not entitled to app group \(group)", subject: group.rawValue)
            }
            let claim: SessionCoordinator.Claim<SessionCore>
            do {
                claim = try SessionCoordinator.shared.claim(layout: environment.layout, family: environment.identity.family, identifier: identifier) {
                    SessionCore(identifier: identifier, configuration: configuration, recordConfiguration: record, delegate: delegate, delegateQueue: queue)
                }
            } catch let error as CoordinatorError {
                if case .inUseByAnotherProcess = error {
                    throw TransferFailure(code: TransferFailure.backgroundSessionInUseByAnotherProcess, message: error.description, subject: name)
                }
                throw TransferFailure(code: TransferFailure.cannotCreateFile, message: error.description, subject: name)
            }
            switch claim {
            case .existing(let core):
                log.notice("session", "A background URLSession with identifier \(name) already exists!", session: name)
                opened = core
            case .opened(let core):
                opened = core
            }
        } catch let error as TransferFailure {
            failure = error
        } catch {
            failure = TransferFailure(code: TransferFailure.unknown, message: "\(error)")
        }

        self.configuration = configuration
        self.core = opened
        self.givenDelegate = delegate
        self.delegateQueue = opened?.delegateQueue ?? queue ?? OperationQueue.serialDelegateQueue(name: "BackgroundTransfer.delegate.invalid")
        self.invalidationError = failure.map { $0.urlError() }
        self.invalidationFailure = failure

        if let core = opened as? SessionCore, core.primary == nil {
            core.adopt(primary: self)
            do {
                try core.attach()
            } catch {
                log.error("session", "cannot open the session in the daemon: \(error)", session: configuration.identifier)
                // The daemon said no, or cannot be found or started: the session is invalid,
                // and says why, rather than take tasks nobody will carry out.
                invalidationError = error.urlError()
                invalidationFailure = error
                core.openingRefused(error)
            }
        }
        if let failure {
            log.error("session", "background session invalid: \(failure.message)", session: configuration.identifier)
            let error = failure.urlError()
            if let delegate {
                let queue = self.delegateQueue
                queue.addOperation { delegate.urlSession(self, didBecomeInvalidWithError: error) }
            }
        }
    }

    // MARK: Tasks

    /// A download task for `url`, suspended until `resume()` (S2.4).
    open func downloadTask(with url: URL) -> URLSessionDownloadTask {
        downloadTask(with: URLRequest(url: url))
    }

    /// A download task for `request` (its method, headers and timeout), suspended until
    /// `resume()`. In a background session the daemon sends its `httpBody` too (at most
    /// `TransferLimits.requestBodyBytes`); a body it cannot send (a default session's, a
    /// stream, a bigger one) fails the task at once, saying so.
    open func downloadTask(with request: URLRequest) -> URLSessionDownloadTask {
        var creation = TaskCreation(kind: .download, request: record(of: request))
        if let failure = downloadBodyRefusal(request) {
            return refusedTask(creation, failure, as: { URLSessionDownloadTask(record: $0, backend: nil) })
        }
        creation.requestBody = request.httpBody // only a background session's gets here with one
        return makeTask(creation, cellular: request.allowsCellularAccess, as: { URLSessionDownloadTask(record: $0, backend: nil) })
    }

    /// A download that continues from resume data (S6.1); the delegate gets
    /// `didResumeAtOffset:expectedTotalBytes:` when it starts. Foreign, corrupted or stale
    /// (already used) resume data makes the task fail with a clear error when resumed.
    open func downloadTask(withResumeData resumeData: Data) -> URLSessionDownloadTask {
        let url = (try? ResumeData(decoding: resumeData))?.url ?? ""
        return makeTask(TaskCreation(kind: .download, request: RequestRecord(url: url), resumeData: resumeData), as: { URLSessionDownloadTask(record: $0, backend: nil) })
    }

    // MARK: Completion handlers and async (default sessions)

    /// A download whose file goes to `completionHandler` (on the delegate queue; the file is
    /// removed when it returns) instead of the delegate. Default sessions only: in a
    /// background session the task comes back failed with Apple's message (S1.2), which the
    /// handler also gets.
    open func downloadTask(with url: URL, completionHandler: @escaping @Sendable (URL?, URLResponse?, Error?) -> Void) -> URLSessionDownloadTask {
        downloadTask(with: URLRequest(url: url), completionHandler: completionHandler)
    }

    /// A download of `request` whose file goes to `completionHandler`, as
    /// `downloadTask(with:completionHandler:)` for a URL.
    open func downloadTask(with request: URLRequest, completionHandler: @escaping @Sendable (URL?, URLResponse?, Error?) -> Void) -> URLSessionDownloadTask {
        let creation = TaskCreation(kind: .download, request: record(of: request))
        // A background session refuses completion handlers first (S1.2), body or not.
        let refusal = configuration.identifier == nil ? downloadBodyRefusal(request) : nil
        return handlerTask(creation, refusal: refusal, as: { URLSessionDownloadTask(record: $0, backend: nil) }) { task, result in
            switch result {
            case .success(let path): completionHandler(URL(fileURLWithPath: path), task.response, nil)
            case .failure(let error): completionHandler(nil, task.response, error)
            }
        }
    }

    /// A request whose whole response body goes to `completionHandler` (on the delegate
    /// queue). Default sessions only, as `downloadTask(with:completionHandler:)`.
    open func dataTask(with url: URL, completionHandler: @escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionDataTask {
        dataTask(with: URLRequest(url: url), completionHandler: completionHandler)
    }

    /// A request (with its `httpBody` or `httpBodyStream`) whose whole response body goes to
    /// `completionHandler`, on the delegate queue. Default sessions only.
    open func dataTask(with request: URLRequest, completionHandler: @escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionDataTask {
        foregroundTask(request, body: .request, kind: .download, as: { URLSessionDataTask(record: $0, backend: nil) }, handler: completionHandler)
    }

    /// A request (with its `httpBody` or `httpBodyStream`) whose response goes to the
    /// delegate's `URLSessionDataDelegate` calls as it arrives, then `didCompleteWithError`.
    /// In a background session (S2.2) it runs in this process, and ends with -997 when the
    /// process goes away (the next process that opens the session hears it).
    open func dataTask(with url: URL) -> URLSessionDataTask {
        dataTask(with: URLRequest(url: url))
    }

    /// A request whose response goes to the delegate as it arrives; see `dataTask(with:)` for a URL.
    open func dataTask(with request: URLRequest) -> URLSessionDataTask {
        foregroundTask(request, body: .request, kind: .download, as: { URLSessionDataTask(record: $0, backend: nil) })
    }

    /// Refused in background sessions (S1.2): thrown with Apple's message.
    open func download(from url: URL) async throws -> (URL, URLResponse) {
        try await download(for: URLRequest(url: url))
    }


    /// The downloaded file, in a default session, moved to a file of its own in the app's
    /// temporary directory (the caller moves or removes it); refused in background sessions (S1.2).
    open func download(for request: URLRequest) async throws -> (URL, URLResponse) {
        guard configuration.identifier == nil else { throw BackgroundSessionMisuse.completionHandlersUnsupported }
        let temporary = BackgroundApplication.shared.temporaryDirectory
        let box = Locked<URLSessionTask?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = downloadTask(with: request) { location, response, error in
                    guard let location, let response else {
                        continuation.resume(throwing: error ?? URLError(.badServerResponse))
                        return
                    }
                    let kept = temporary.appendingPathComponent("CFNetworkDownload_\(UUID().uuidString).tmp")
                    do {
                        try FileManager.default.moveItem(at: location, to: kept)
                        continuation.resume(returning: (kept, response))
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                box.withLock { $0 = task }
                task.resume()
            }
        } onCancel: {
            box.withLock { $0 }?.cancel()
        }
    }

    /// An upload of the file at `fileURL` with `request`'s method (PUT or POST) and headers,
    /// suspended until `resume()` (S2.1). The daemon keeps its own link to the file, so the
    /// upload finishes even if this process exits and the file is removed. A file that is
    /// missing (-1100), a directory (-1101), or unreadable or outside the app's containers
    /// (-1102) makes the task fail when resumed, with the path in the error.
    open func uploadTask(with request: URLRequest, fromFile fileURL: URL) -> URLSessionUploadTask {
        if configuration.identifier == nil {
            return foregroundTask(request, body: .file(fileURL), kind: .upload, as: { URLSessionUploadTask(record: $0, backend: nil) })
        }
        let creation = TaskCreation(kind: .upload, request: record(of: request), uploadFile: fileURL.standardizedFileURL.path)
        return makeTask(creation, cellular: request.allowsCellularAccess, as: { URLSessionUploadTask(record: $0, backend: nil) })
    }

    /// An upload that continues where the server's copy ends (S6.6): HEAD for the offset, then
    /// PATCH of the rest. The resume data comes from `cancel(byProducingResumeData:)` or from
    /// `NSURLSessionUploadTaskResumeData` in an error's userInfo.
    open func uploadTask(withResumeData resumeData: Data) -> URLSessionUploadTask {
        let url = (try? ResumeData(decoding: resumeData))?.url ?? ""
        return makeTask(TaskCreation(kind: .upload, request: RequestRecord(url: url), resumeData: resumeData), as: { URLSessionUploadTask(record: $0, backend: nil) })
    }

    /// An upload of `bodyData` (default sessions; refused in background sessions, S2.1: the
    /// task comes back failed with Apple's message).
    open func uploadTask(with request: URLRequest, from bodyData: Data) -> URLSessionUploadTask {
        foregroundTask(request, body: .data(bodyData), kind: .upload, as: { URLSessionUploadTask(record: $0, backend: nil) },
                       refusal: BackgroundSessionMisuse.uploadFromDataUnsupported.message)
    }

    /// An upload of `request.httpBodyStream`, asked again through `needNewBodyStream`
    /// (default sessions; refused in background sessions, S2.1).
    open func uploadTask(withStreamedRequest request: URLRequest) -> URLSessionUploadTask {
        foregroundTask(request, body: .stream, kind: .upload, as: { URLSessionUploadTask(record: $0, backend: nil) },
                       refusal: BackgroundSessionMisuse.uploadFromStreamUnsupported.message)
    }

    /// The session's unfinished tasks by kind (Apple's `getTasksWithCompletionHandler`), on the delegate queue.
    open func getTasksWithCompletionHandler(_ completionHandler: @escaping @Sendable ([URLSessionDataTask], [URLSessionUploadTask], [URLSessionDownloadTask]) -> Void) {
        getAllTasks { tasks in
            let (data, uploads, downloads) = Self.sorted(tasks)
            completionHandler(data, uploads, downloads)
        }
    }

    /// The session's unfinished tasks by kind (Apple's async `tasks`).
    open var tasks: ([URLSessionDataTask], [URLSessionUploadTask], [URLSessionDownloadTask]) {
        get async { Self.sorted(await allTasks) }
    }

    private static func sorted(_ tasks: [URLSessionTask]) -> ([URLSessionDataTask], [URLSessionUploadTask], [URLSessionDownloadTask]) {
        (tasks.compactMap { $0 is URLSessionUploadTask ? nil : $0 as? URLSessionDataTask },
         tasks.compactMap { $0 as? URLSessionUploadTask },
         tasks.compactMap { $0 as? URLSessionDownloadTask })
    }

    /// The session's unfinished tasks, as the daemon knows them (S7.2), on the delegate queue.
    open func getAllTasks(completionHandler: @escaping @Sendable ([URLSessionTask]) -> Void) {
        guard let core else {
            delegateQueue.addOperation { completionHandler([]) }
            return
        }
        core.allTasks { [delegateQueue] tasks in delegateQueue.addOperation { completionHandler(tasks) } }
    }

    /// The session's unfinished tasks (S7.2); suspends, holding no thread, while the daemon answers.
    open var allTasks: [URLSessionTask] {
        get async {
            guard let core else { return [] }
            return await withCheckedContinuation { continuation in core.allTasks { continuation.resume(returning: $0) } }
        }
    }

    /// Waits until every event that was waiting when the session was opened has been handed
    /// to the delegate, and the tasks held on challenges then have been answered (ours, not
    /// Apple's: a user-launched command-line app needs to know when it has caught up). False
    /// on timeout or for an invalid session.
    public func waitForPendingEvents(timeout: TimeInterval) -> Bool {
        core?.waitForBacklog(timeout: timeout) ?? false
    }

    /// Waits until every event received so far has been handed to the delegate and
    /// acknowledged (ours, not Apple's: a command-line process about to exit after its
    /// completion, so that the daemon does not relaunch the app for an event it has seen).
    /// Call it from outside the delegate queue.
    public func waitForDeliveries() {
        core?.drainDeliveries()
    }

    /// Calls back, on the delegate queue, once the transfer daemon has made durable every
    /// task created and every change made so far in this session: `downloadTask(with:)` and
    /// `resume()` return before the daemon has them, as on Apple's systems. (Apple's `flush`
    /// writes cookies and credentials to disk; a background session here has nothing else
    /// to write.) A process about to exit after creating tasks calls this first.
    open func flush(completionHandler: @escaping @Sendable () -> Void) {
        let core = self.core
        DispatchQueue.global().async {
            _ = core?.waitForAnswers(timeout: DaemonConnection.requestTimeout)
            self.delegateQueue.addOperation { completionHandler() }
        }
    }

    /// Waits until the transfer daemon has made durable every task created and every change
    /// made so far (ours: `flush` without the callback); false on timeout. Call it from
    /// outside the delegate queue.
    @discardableResult
    public func waitUntilDurable(timeout: TimeInterval = 30) -> Bool {
        core?.waitForAnswers(timeout: timeout) ?? true
    }

    // MARK: Invalidation

    /// No new tasks; running ones finish; then `didBecomeInvalidWithError(nil)` (S1.4).
    open func finishTasksAndInvalidate() {
        core?.invalidate(cancelTasks: false)
    }

    /// Every task ends with -999 — in the daemon too — then invalidation (S1.4).
    open func invalidateAndCancel() {
        core?.invalidate(cancelTasks: true)
    }
}
