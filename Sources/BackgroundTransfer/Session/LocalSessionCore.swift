import Foundation
import TransferContainer
import TransferTransport
import TransferLogging
import TransferPOSIX

/// A default session: its downloads run inside this process (on the engine's local
/// transfer thread) and end with it. Partial files lie in the app's private container, so
/// `cancel(byProducingResumeData:)` hands over bytes a background session can continue from.
/// Its data and upload tasks go to FoundationNetworking (`ForegroundSession`).
///
/// Callbacks from the transfer thread are handed, in order, to `deliveryQueue` (serial),
/// which runs each delegate call on the delegate queue and waits for it. State is in `state`.
final class LocalSessionCore: SessionBackend, @unchecked Sendable {
    let configuration: URLSessionConfiguration
    let delegate: URLSessionDelegate?
    let delegateQueue: OperationQueue
    private(set) weak var primary: URLSession?
    private var strongPrimary: URLSession?
    private let deliveryQueue = DispatchQueue(label: "BackgroundTransfer.local-delivery")
    private let directory: URL
    private let log: TransferLog
    private let runner = LocalTransferRunner.shared

    private struct State {
        var nextTaskIdentifier = 1
        var tasks: [Int: URLSessionTask] = [:]
        var invalidated = false
        var finishing = false
        /// Completion handlers of tasks made with one (they replace the delegate's data calls).
        var handlers: [Int: @Sendable (URLSessionTask, Result<String, TransferFailure>) -> Void] = [:]
        /// How each HTTPS origin ("host:port") is trusted, as the delegate decided (S3.6);
        /// asked once per origin for the session's life.
        var trustByOrigin: [String: TLSPolicy] = [:]
    }

    /// Where server-trust questions wait for their handshake and the delegate's answer, one
    /// at a time, so a second task to an origin finds the first's decision.
    let trustQueue = DispatchQueue(label: "BackgroundTransfer.local-trust")

    private let state = Locked(State())
    /// The FoundationNetworking session behind this session's data and upload tasks, made on the first.
    let foregroundSession = Locked<ForegroundSession?>(nil)

    init(configuration: URLSessionConfiguration, delegate: URLSessionDelegate?, delegateQueue: OperationQueue?) {
        self.configuration = configuration
        self.delegate = delegate
        self.delegateQueue = delegateQueue ?? .serialDelegateQueue(name: "BackgroundTransfer.delegate.default")
        let environment = AppEnvironment.current
        self.directory = environment.layout.privateContainer(environment.identity.bundleIdentifier).appendingPathComponent("Library/Caches/BackgroundTransfer/Foreground")
        self.log = environment.log
    }

    func adopt(primary session: URLSession) {
        primary = session
        strongPrimary = session
    }

    var isInvalidated: Bool { state.withLock { $0.invalidated || $0.finishing } }

    func waitForBacklog(timeout: TimeInterval) -> Bool { true }
    /// Nothing of a default session is kept on disk: there is nothing to wait for.
    func waitForAnswers(timeout: TimeInterval) -> Bool { true }

    func drainDeliveries() {} // nothing to acknowledge: no daemon keeps a default session's events

    private func partialPath(_ taskIdentifier: Int) -> String {
        directory.appendingPathComponent("task-\(taskIdentifier)-\(ObjectIdentifier(self).hashValue).partial").path
    }

    // MARK: Tasks

    func createTask(_ creation: TaskCreation) throws(TransferFailure) -> URLSessionTask {
        guard creation.kind == .download else {
            throw TransferFailure(code: TransferFailure.unsupportedURL, message: "default sessions here run downloads; upload from a file in a background session")
        }
        let identifier = reserveTaskIdentifier()
        var record = TaskRecord(taskIdentifier: identifier, kind: .download, originalRequest: creation.request)
        record.taskDescription = creation.taskDescription
        if let blob = creation.resumeData {
            try adoptResumeData(blob, into: &record)
        }
        let task = URLSessionDownloadTask(record: record, backend: self)
        state.withLock { $0.tasks[identifier] = task }
        return task
    }

    /// Continues from resume data (a background session's or a default session's): its
    /// partial file becomes this task's, its validator goes with the `Range` request, and the
    /// delegate hears `didResumeAtOffset` when the task starts. The data is single-use, as in
    /// the daemon; foreign or corrupted data fails with -1016, stale data with -3001.
    private func adoptResumeData(_ blob: Data, into record: inout TaskRecord) throws(TransferFailure) {
        let resume: ResumeData
        do { resume = try ResumeData(decoding: blob) } catch {
            throw TransferFailure(code: TransferFailure.cannotDecodeContentData, message: error.description)
        }
        guard resume.kind == .download, resume.upload == nil else {
            throw TransferFailure(code: TransferFailure.cannotDecodeContentData, message: "resume data of an upload cannot make a download task")
        }
        // The daemon names the partial file relative to the container (a default session's
        // own resume data names it absolutely, inside the container): either way, this one.
        guard let partial = AppEnvironment.current.layout.resolveRecordPath(resume.partialFile) else {
            throw TransferFailure(code: TransferFailure.cannotDecodeContentData, message: "foreign resume data: its partial file \(resume.partialFile) is not in this container", subject: resume.partialFile)
        }
        var st = stat()
        guard lstat(partial, &st) == 0, st.st_mode & S_IFMT == S_IFREG, Int64(st.st_size) >= resume.bytesReceived else {
            throw TransferFailure(code: TransferFailure.cannotOpenFile, message: "stale resume data: its partial data \(partial) is gone or short (resume data is single-use)", subject: partial)
        }
        let destination = partialPath(record.taskIdentifier)
        do { try DurableFile.makeDirectory(directory.path) } catch {
            throw TransferFailure(code: TransferFailure.cannotCreateFile, message: "\(error)", subject: directory.path)
        }
        guard rename(partial, destination) == 0 else {
            throw TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot take the partial data \(partial): errno \(errno)", subject: partial)
        }
        truncate(destination, off_t(resume.bytesReceived))
        record.originalRequest = RequestRecord(url: resume.url, httpMethod: resume.httpMethod, headers: resume.requestHeaders)
        record.validator = resume.validator
        record.countOfBytesReceived = resume.bytesReceived
        record.countOfBytesExpectedToReceive = resume.expectedTotalBytes
        record.reportsResumeOffset = true
    }

    func reserveTaskIdentifier() -> Int {
        state.withLock { state in
            defer { state.nextTaskIdentifier += 1 }
            return state.nextTaskIdentifier
        }
    }

    /// A data or upload task, carried out by FoundationNetworking (`ForegroundSession`).
    func createForegroundTask<Task: URLSessionTask>(_ request: URLRequest, body: ForegroundBody, creation: TaskCreation, as make: (TaskRecord) -> Task,
                                                    handler: (@Sendable (Data?, URLResponse?, Error?) -> Void)? = nil) -> Task {
        let foreground = foregroundSession.withLock { made in
            if let made { return made }
            let session = ForegroundSession(configuration: configuration, delegate: delegate, delegateQueue: delegateQueue, session: { [weak self] in self?.primary }) { [weak self] task in
                guard let self else { return }
                let finishing = self.state.withLock { state in
                    state.tasks.removeValue(forKey: task.taskIdentifier)
                    return state.finishing
                }
                // Only a session being invalidated waits for its last task (a hop per task cost a thread wake-up).
                if finishing { self.deliveryQueue.async { self.invalidateIfFinished() } }
            }
            made = session
            return session
        }
        let record = TaskRecord(taskIdentifier: reserveTaskIdentifier(), kind: creation.kind, originalRequest: creation.request)
        let task = foreground.makeTask(request, body: body, record: record, backend: self, as: make, handler: handler)
        state.withLock { $0.tasks[record.taskIdentifier] = task }
        return task
    }

    /// A download whose outcome goes to
    /// `handler`, on the delegate queue, instead of the delegate's data calls.
    func createHandlerTask<Task: URLSessionTask>(_ creation: TaskCreation, make: (TaskRecord) -> Task, handler: @escaping @Sendable (URLSessionTask, Result<String, TransferFailure>) -> Void) -> Task {
        let task = state.withLock { state -> Task in
            var record = TaskRecord(taskIdentifier: state.nextTaskIdentifier, kind: .download, originalRequest: creation.request)
            record.taskDescription = creation.taskDescription
            state.nextTaskIdentifier += 1
            let task = make(record)
            task.backend = self
            state.tasks[record.taskIdentifier] = task
            state.handlers[record.taskIdentifier] = handler
            return task
        }
        return task
    }

    func resume(_ task: URLSessionTask) {
        if let inner = task.foundationTask { return resumeForeground(task, inner) }
        guard task.state == .suspended else { return }
        var record = task.record
        record.state = .running
        task.update(record)
        guard let url = URL(string: record.originalRequest.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            finish(task, .failure(TransferFailure(code: TransferFailure.unsupportedURL, message: "unsupported URL \(record.originalRequest.url)")))
            return
        }
        if let port = url.port, !(1...65535).contains(port) { // as FoundationNetworking answers it
            finish(task, .failure(TransferFailure(code: TransferFailure.badURL, message: "bad URL \(record.originalRequest.url): port \(port)", subject: record.originalRequest.url)))
            return
        }
        do { try DurableFile.makeDirectory(directory.path) } catch {
            finish(task, .failure(TransferFailure(code: TransferFailure.cannotCreateFile, message: "\(error)", subject: directory.path)))
            return
        }
        let configuration = (try? self.configuration.record()) ?? SessionConfiguration()
        guard scheme == "https", delegate != nil else {
            start(task, record, configuration: configuration, tls: .systemDefault)
            return
        }
        let started = record
        trustQueue.async {
            switch self.serverTrustDecision(for: started.requestToSend.url, configuration: configuration) {
            case .proceed(let tls):
                guard task.state == .running else { return } // cancelled or suspended meanwhile
                self.start(task, started, configuration: configuration, tls: tls)
            case .fail(let failure):
                guard task.state == .running else { return }
                self.finish(task, .failure(failure))
            }
        }
    }

    private func start(_ task: URLSessionTask, _ record: TaskRecord, configuration: SessionConfiguration, tls: TLSPolicy) {
        runner.start(record, partialPath: partialPath(task.taskIdentifier), configuration: configuration, tls: tls, callbacks: .init(
            progress: { [weak self, weak task] progress in
                guard let self, let task else { return }
                task.update(progress)
                self.deliveryQueue.async {
                    guard let download = task as? URLSessionDownloadTask, let delegate = self.delegate as? URLSessionDownloadDelegate else { return }
                    self.onDelegateQueue { session in
                        delegate.urlSession(session, downloadTask: download, didWriteData: progress.bytesWritten, totalBytesWritten: progress.totalBytesWritten, totalBytesExpectedToWrite: progress.totalBytesExpectedToWrite)
                    }
                }
            },
            finished: { [weak self, weak task] record, result in
                guard let self, let task else { return }
                task.update(record)
                self.finish(task, result.map { $0 })
            },
            resumed: { [weak self, weak task] record, offset in
                // Once the server has answered: the offset is 0 when the bytes on disk were
                // of another version and the download started over.
                guard let self, let download = task as? URLSessionDownloadTask else { return }
                let expected = record.countOfBytesExpectedToReceive
                self.deliveryQueue.async {
                    guard let delegate = self.delegate as? URLSessionDownloadDelegate else { return }
                    self.onDelegateQueue { session in delegate.urlSession(session, downloadTask: download, didResumeAtOffset: offset, expectedTotalBytes: expected) }
                }
            }))
    }

    func suspend(_ task: URLSessionTask) {
        if let inner = task.foundationTask { return inner.suspend() }
        guard task.state == .running else { return }
        var record = runner.stop(taskIdentifier: task.taskIdentifier) ?? task.record
        record.state = .suspended
        task.update(record)
    }

    func cancel(_ task: URLSessionTask) {
        _ = cancel(task, produceResumeData: false)
    }

    func cancel(_ task: URLSessionTask, produceResumeData: Bool) -> Data? {
        if let inner = task.foundationTask {
            inner.cancel()
            return nil // FoundationNetworking's uploads make no resume data
        }
        guard task.state != .completed else { return nil }
        let record = runner.stop(taskIdentifier: task.taskIdentifier) ?? task.record
        task.update(record)
        let partial = partialPath(task.taskIdentifier)
        var failure = TransferFailure(code: TransferFailure.cancelled, message: "cancelled")
        let size = ((try? FileManager.default.attributesOfItem(atPath: partial)[.size]) as? NSNumber)?.int64Value ?? 0
        if produceResumeData, record.canResume(partialBytes: size), let validator = record.validator {
            // The bytes stay where they are; the session that resumes takes them.
            failure.resumeData = ResumeData(url: record.originalRequest.url, bytesReceived: size, expectedTotalBytes: record.countOfBytesExpectedToReceive,
                                            entityTag: validator.entityTag, lastModified: validator.lastModified, partialFile: partial, requestHeaders: record.originalRequest.headers).encoded()
        }
        finish(task, .failure(failure), keepPartial: failure.resumeData != nil)
        return failure.resumeData
    }

    func propertiesChanged(of task: URLSessionTask) {} // kept on the task object itself

    /// The tasks not yet completed. A task leaves `tasks` only after its delegate has heard
    /// `didCompleteWithError`, and is already completed during that call: it is left out then.
    func allTasks() -> [URLSessionTask] {
        state.withLock { $0.tasks.values.filter { $0.state != .completed } }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    func allTasks(_ done: @escaping @Sendable ([URLSessionTask]) -> Void) { done(allTasks()) }

    /// `task` stands for the task of its identifier from now on (a data task became a download).
    func replace(with task: URLSessionTask) {
        state.withLock { $0.tasks[task.taskIdentifier] = task }
    }

    // MARK: Server trust (S2.6, S3.6)

    enum TrustDecision {
        case proceed(TLSPolicy)
        case fail(TransferFailure)
    }

    /// On `trustQueue`: how to trust `url`'s server. The first time for an origin, a
    /// handshake-only probe learns the chain and its default evaluation, and the session
    /// delegate's `urlSession(_:didReceive:completionHandler:)` is asked with a server-trust
    /// challenge before any request is sent; `.useCredential` with `URLCredential(trust:)`
    /// accepts exactly that key (pinned), default handling keeps the default evaluation, and
    /// cancelling ends the task with -999. Accepted and trusted origins are remembered.
    func serverTrustDecision(for url: String, configuration: SessionConfiguration) -> TrustDecision {
        guard let endpoint = ProtectionSpaceRecord.endpoint(of: url) else { return .proceed(.systemDefault) }
        let origin = "\(endpoint.host):\(endpoint.port)"
        if let known = state.withLock({ $0.trustByOrigin[origin] }) { return .proceed(known) }
        guard case .success(let record) = ServerChainProbe.evaluate(url: url, proxy: configuration.proxy(for: url), timeout: min(configuration.timeoutIntervalForRequest, 60)) else {
            return .proceed(.systemDefault) // no handshake at all: the transfer reports why
        }
        let trust = SecTrust(record)
        let answered = DispatchSemaphore(value: 0)
        let answer = Locked<(URLSession.AuthChallengeDisposition, URLCredential?)>((.performDefaultHandling, nil))
        let challenge = URLAuthenticationChallenge(serverTrust: trust)
        if let delegate, primary != nil {
            onDelegateQueue { session in
                delegate.urlSession(session, didReceive: challenge) { disposition, credential in
                    answer.withLock { $0 = (disposition, credential) }
                    answered.signal()
                }
            }
            answered.wait() // the app's answer, however late (as on Apple's systems)
        }
        let (disposition, credential) = answer.withLock { $0 }
        var untrusted = TransferFailure(code: record.failureCode ?? TransferFailure.serverCertificateUntrusted,
                                        message: "The certificate for this server is invalid (\(record.failureReason ?? "not accepted")); connecting to \(origin) could put confidential information at risk", subject: url)
        untrusted.failingURL = url
        untrusted.serverTrust = record
        switch disposition {
        case .useCredential:
            guard let pin = credential?.acceptedServerKeyPin else { fallthrough }
            guard pin == record.leafPublicKeyPin else { return .fail(untrusted) } // a trust for another server's key
            let policy = TLSPolicy(acceptedPublicKeyPin: pin)
            state.withLock { $0.trustByOrigin[origin] = policy }
            return .proceed(policy)
        case .performDefaultHandling, .rejectProtectionSpace:
            guard record.isTrustedByDefault else { return .fail(untrusted) }
            state.withLock { $0.trustByOrigin[origin] = .systemDefault }
            return .proceed(.systemDefault)
        case .cancelAuthenticationChallenge:
            var cancelled = TransferFailure(code: TransferFailure.cancelled, message: "cancelled (the server-trust challenge was cancelled)", subject: url)
            cancelled.failingURL = url
            return .fail(cancelled)
        @unknown default:
            return .fail(untrusted)
        }
    }

    // MARK: Delivery

    /// Ends a task: the delegate gets didFinishDownloadingTo (success) and didCompleteWithError.
    private func finish(_ task: URLSessionTask, _ result: Result<String, TransferFailure>, keepPartial: Bool = false) {
        task.setState(.completed)
        state.withLock { _ = $0.tasks.removeValue(forKey: task.taskIdentifier) }
        let handler = state.withLock { $0.handlers.removeValue(forKey: task.taskIdentifier) }
        deliveryQueue.async {
            var error: Error?
            if let handler {
                self.delegateQueue.addOperations([BlockOperation { handler(task, result) }], waitUntilFinished: true)
            }
            switch result {
            case .success(let path):
                if handler == nil, let download = task as? URLSessionDownloadTask, let delegate = self.delegate as? URLSessionDownloadDelegate {
                    self.onDelegateQueue { session in delegate.urlSession(session, downloadTask: download, didFinishDownloadingTo: URL(fileURLWithPath: path)) }
                }
                unlink(path) // exists only during the call (S3.3)
                unlink(self.partialPath(task.taskIdentifier))
            case .failure(let failure):
                error = failure.urlError(failingURL: task.originalRequest?.url?.absoluteString)
                if !keepPartial { unlink(self.partialPath(task.taskIdentifier)) }
            }
            task.finish(with: error)
            let outcome = error
            if let delegate = self.delegate as? URLSessionTaskDelegate {
                let metrics = URLSessionTaskMetrics(task: task.record, endedAt: Date(), request: { task.currentRequest }, response: { task.response })
                self.onDelegateQueue { session in
                    delegate.urlSession(session, task: task, didFinishCollecting: metrics)
                    delegate.urlSession(session, task: task, didCompleteWithError: outcome)
                }
            }
            self.invalidateIfFinished()
        }
    }

    private func onDelegateQueue(_ call: @escaping @Sendable (URLSession) -> Void) {
        guard let session = primary else { return }
        delegateQueue.addOperations([BlockOperation { call(session) }], waitUntilFinished: true)
    }

    // MARK: Invalidation

    func invalidate(cancelTasks: Bool) {
        state.withLock { $0.finishing = true }
        if cancelTasks { allTasks().forEach { cancel($0) } }
        foregroundSession.withLock { $0 }?.inner.finishTasksAndInvalidate()
        deliveryQueue.async { self.invalidateIfFinished() }
    }

    private func invalidateIfFinished() {
        let now = state.withLock { state -> Bool in
            guard state.finishing, !state.invalidated, state.tasks.isEmpty else { return false }
            state.invalidated = true
            return true
        }
        guard now else { return }
        onDelegateQueue { session in self.delegate?.urlSession(session, didBecomeInvalidWithError: nil) }
        strongPrimary = nil
    }
}
