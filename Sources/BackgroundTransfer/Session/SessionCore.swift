import Foundation
import FoundationNetworking
import TransferContainer

/// One background session open in this process: its attachment to the daemon, its task
/// objects, and the in-order, exactly-once delivery of its events to the delegate.
///
/// Built once per identifier and cached by `SessionCoordinator` (S1.3). Pushes arrive on the
/// connection's reader thread and are handed, in order, to `deliveryQueue` (serial), which
/// runs each delegate call on the delegate queue and waits for it: the delegate sees events
/// one at a time, in event-number order (S3.5). State shared between threads is in `state`.
final class SessionCore: SessionBackend, @unchecked Sendable {
    let identifier: SessionIdentifier
    let configuration: URLSessionConfiguration
    let delegate: URLSessionDelegate?
    let delegateQueue: OperationQueue
    /// The first `URLSession` built for this identifier: the one delegates are given.
    private(set) weak var primary: URLSession?
    private var strongPrimary: URLSession?
    private let deliveryQueue: DispatchQueue
    private let layout: ContainerLayout
    private let family: BundleIdentifier
    let log: TransferLog
    private let recordConfiguration: SessionConfiguration

    private struct State {
        var connection: DaemonConnection?
        var tasks: [Int: URLSessionTask] = [:]
        /// The highest event number the delegate has seen (durable in `delivered.json`).
        var deliveredThrough: UInt64 = 0
        /// The highest event number received from the daemon (delivered or a duplicate).
        var receivedThrough: UInt64 = 0
        var acknowledgedThrough: UInt64 = 0
        /// True while the app, launched for this session's events, has not called the
        /// completion handler: events are then acknowledged only by that call (S3.2, S3.4).
        var acknowledgesOnCompletionHandler = false
        var finishEventsDelivered = false
        var invalidated = false
        var invalidating = false
        /// An event whose delivery a previous holder did not finish, and the call it was in.
        var interrupted: (number: UInt64, phase: DeliveryPhase)?
    }

    private let state = Locked(State())
    /// Signalled when the events waiting at open have all been handed to the delegate.
    private let backlogCondition = NSCondition()
    private var backlogHandled = false

    /// `Sessions/<family>/<identifier>/delivered.json`: which events the delegate has seen,
    /// so that a process killed before acknowledging never shows one twice (S3.4). Written
    /// before each delegate call too (`inProgress`, `phase`): a process killed inside a
    /// delegate call must not repeat that call when the event is replayed.
    private struct DeliveryRecord: Codable {
        var version = 1
        var deliveredThrough: UInt64
        /// The event being handed to the delegate, and which call was under way.
        var inProgress: UInt64?
        var phase: DeliveryPhase?
    }

    enum DeliveryPhase: String, Codable {
        case finishingDownload
        case receivingData
        case completing
    }

    private var deliveryRecordPath: String {
        layout.sessionDirectory(family: family, identifier: identifier).appendingPathComponent("delivered.json").path
    }

    init(identifier: SessionIdentifier, configuration: URLSessionConfiguration, recordConfiguration: SessionConfiguration, delegate: URLSessionDelegate?, delegateQueue: OperationQueue?) {
        self.identifier = identifier
        self.configuration = configuration
        self.recordConfiguration = recordConfiguration
        self.delegate = delegate
        self.delegateQueue = delegateQueue ?? .serialDelegateQueue(name: "BackgroundTransfer.delegate.\(identifier)")
        self.deliveryQueue = DispatchQueue(label: "BackgroundTransfer.delivery.\(identifier)")
        let environment = AppEnvironment.current
        self.layout = environment.layout
        self.family = environment.identity.family
        self.log = environment.log
        let record = try? RecordCoding.read(DeliveryRecord.self, from: deliveryRecordPath)
        let launchedForEvents = BackgroundLaunch.isLaunched(for: identifier)
        state.withLock {
            $0.deliveredThrough = record?.deliveredThrough ?? 0
            if let number = record?.inProgress, let phase = record?.phase { $0.interrupted = (number, phase) }
            $0.acknowledgesOnCompletionHandler = launchedForEvents
        }
    }

    func adopt(primary session: URLSession) {
        primary = session
        strongPrimary = session // the system keeps a session alive until it is invalidated
    }

    // MARK: Attaching

    /// Opens the session in the daemon and subscribes to its pushes.
    func attach() throws(TransferFailure) {
        let connection = try DaemonConnection.shared()
        connection.subscribe(identifier, .init(
            onPush: { [weak self] push in self?.received(push) },
            onReconnect: { [weak self] in self?.reattach() }))
        state.withLock { $0.connection = connection }
        try open(on: connection)
        log.notice("session", "opened background session (\(state.withLock { $0.tasks.count }) unfinished tasks)", session: identifier.rawValue)
    }

    private func open(on connection: DaemonConnection) throws(TransferFailure) {
        let launched = BackgroundLaunch.isLaunched(for: identifier)
        let reply = try connection.request(.openSession(identifier: identifier, configuration: recordConfiguration, launchedForEvents: launched))
        guard case .sessionOpened(let records) = reply else { return }
        for record in records { _ = taskObject(for: record) }
    }

    /// After the daemon restarted: open again; undelivered events are replayed (and deduplicated).
    private func reattach() {
        guard let connection = state.withLock({ $0.invalidated ? nil : $0.connection }) else { return }
        do {
            try open(on: connection)
            log.notice("session", "reattached after the daemon restarted", session: identifier.rawValue)
        } catch {
            log.error("session", "cannot reattach: \(error)", session: identifier.rawValue)
        }
    }

    /// Sends a request, riding through a daemon restart: while the connection is lost, or
    /// before this session has reattached, it waits and sends again (for up to 15 s). A
    /// `resume()` must not be lost because the daemon was being restarted at that instant.
    /// (A `createTask` whose reply was lost can be created twice; losing it would be worse.)
    private func request(_ request: DaemonRequest) throws(TransferFailure) -> DaemonReply {
        let deadline = Date().addingTimeInterval(15)
        while true {
            do {
                return try connection().request(request)
            } catch {
                let transient = error.code == TransferFailure.networkConnectionLost
                    || (error.code == TransferFailure.requestRefused && error.message.contains("is not open in this process"))
                guard transient, Date() < deadline, !state.withLock({ $0.invalidated }) else { throw error }
                usleep(50_000) // the connection reconnects and the session reattaches by themselves
            }
        }
    }

    private func connection() throws(TransferFailure) -> DaemonConnection {
        guard let connection = state.withLock({ $0.connection }) else {
            throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "session \(identifier) is not attached to the transfer daemon", subject: identifier.rawValue)
        }
        return connection
    }

    var isInvalidated: Bool { state.withLock { $0.invalidated || $0.invalidating } }

    // MARK: Tasks

    /// The one task object for a daemon task (created on first sight, e.g. after relaunch).
    func taskObject(for record: TaskRecord) -> URLSessionTask {
        state.withLock { state in
            if let existing = state.tasks[record.taskIdentifier] {
                return existing
            }
            let task: URLSessionTask = record.kind == .download ? URLSessionDownloadTask(record: record, backend: self) : URLSessionUploadTask(record: record, backend: self)
            if record.state != .completed { state.tasks[record.taskIdentifier] = task }
            return task
        }
    }

    func createTask(_ creation: TaskCreation) throws(TransferFailure) -> URLSessionTask {
        let reply = try request(.createTask(session: identifier, creation))
        guard case .task(let record) = reply else {
            throw TransferFailure(code: TransferFailure.unknown, message: "unexpected reply to createTask")
        }
        return taskObject(for: record)
    }

    func resume(_ task: URLSessionTask) {
        perform(.resumeTask(session: identifier, task: task.taskIdentifier), on: task)
    }

    func suspend(_ task: URLSessionTask) {
        perform(.suspendTask(session: identifier, task: task.taskIdentifier), on: task)
    }

    func cancel(_ task: URLSessionTask) {
        _ = cancel(task, produceResumeData: false)
    }

    /// Cancels in the daemon; with `produceResumeData`, returns resume data when the download can be resumed (S6.1).
    func cancel(_ task: URLSessionTask, produceResumeData: Bool) -> Data? {
        guard task.state != .completed else { return nil }
        task.setState(.canceling)
        do {
            let reply = try self.request(.cancelTask(session: identifier, task: task.taskIdentifier, produceResumeData: produceResumeData))
            if case .cancelled(let data) = reply { return data }
        } catch {
            log.error("session", "cancel failed: \(error)", session: identifier.rawValue, task: task.taskIdentifier)
        }
        return nil
    }

    func propertiesChanged(of task: URLSessionTask) {
        guard task.state != .completed else { return }
        perform(.setTaskProperties(session: identifier, task: task.taskIdentifier, TaskProperties(of: task.record)), on: task)
    }

    func perform(_ request: DaemonRequest, on task: URLSessionTask) {
        do {
            let reply = try self.request(request)
            if case .task(let record) = reply { task.update(record) }
        } catch {
            // The request's name only: its payload may hold a credential or a token.
            log.error("session", "\(String(describing: request).prefix { $0 != "(" }) failed: \(error)", session: identifier.rawValue, task: task.taskIdentifier)
        }
    }

    /// The session's unfinished tasks, in identifier order, as the daemon has them now. The
    /// daemon summarises each (`TaskSummaries`); the records themselves are asked for, in one
    /// more request, only of tasks this process has no object for or a snapshot of another
    /// revision of. Tasks missing from the summary have finished.
    func allTasks() -> [URLSessionTask] {
        let adopt = { (record: TaskRecord) -> URLSessionTask in
            let task = self.taskObject(for: record)
            task.update(record)
            return task
        }
        do {
            let summaries: [TaskSummary]
            switch try request(.getAllTasks(session: identifier)) {
            case .taskSummaries(let list): summaries = list.tasks
            case .tasks(let records): return records.map(adopt) // a daemon from before summaries
            default: return []
            }
            let known = state.withLock { $0.tasks }
            var tasks: [URLSessionTask] = []
            var unseen: [Int] = []
            for summary in summaries {
                if let task = known[summary.taskIdentifier], task.update(summary) {
                    tasks.append(task)
                } else {
                    unseen.append(summary.taskIdentifier)
                }
            }
            guard !unseen.isEmpty else { return tasks }
            if case .tasks(let records) = try request(.getTasks(session: identifier, identifiers: unseen)) {
                tasks += records.map(adopt)
            }
            return tasks.sorted { $0.taskIdentifier < $1.taskIdentifier }
        } catch {
            log.error("session", "getAllTasks failed: \(error)", session: identifier.rawValue)
            return state.withLock { Array($0.tasks.values) }.sorted { $0.taskIdentifier < $1.taskIdentifier }
        }
    }

    // MARK: Delivery

    private func received(_ push: DaemonPush) {
        switch push {
        case .event(_, let event):
            deliveryQueue.async { self.deliver(event) }
        case .progress(_, let progress):
            guard let task = state.withLock({ $0.tasks[progress.taskIdentifier] }) else { return }
            task.update(progress)
            deliveryQueue.async {
                if task is URLSessionUploadTask, let delegate = self.delegate as? URLSessionTaskDelegate {
                    self.onDelegateQueue { session in
                        delegate.urlSession(session, task: task, didSendBodyData: progress.bytesSent, totalBytesSent: progress.totalBytesSent, totalBytesExpectedToSend: progress.totalBytesExpectedToSend)
                    }
                } else if let download = task as? URLSessionDownloadTask, let delegate = self.delegate as? URLSessionDownloadDelegate {
                    self.onDelegateQueue { session in
                        delegate.urlSession(session, downloadTask: download, didWriteData: progress.bytesWritten, totalBytesWritten: progress.totalBytesWritten, totalBytesExpectedToWrite: progress.totalBytesExpectedToWrite)
                    }
                }
            }
        case .didResume(_, let taskID, let offset, let expected):
            guard let download = state.withLock({ $0.tasks[taskID] }) as? URLSessionDownloadTask else { return }
            deliveryQueue.async {
                guard let delegate = self.delegate as? URLSessionDownloadDelegate else { return }
                self.onDelegateQueue { session in
                    delegate.urlSession(session, downloadTask: download, didResumeAtOffset: offset, expectedTotalBytes: expected)
                }
            }
        case .waitingForConnectivity(_, let taskID):
            guard let task = state.withLock({ $0.tasks[taskID] }) else { return }
            deliveryQueue.async {
                guard let delegate = self.delegate as? URLSessionTaskDelegate else { return }
                self.onDelegateQueue { session in delegate.urlSession(session, taskIsWaitingForConnectivity: task) }
            }
        case .delayedRequest(_, let record):
            let task = taskObject(for: record)
            task.update(record)
            deliveryQueue.async { self.askDelayedRequest(task) }
        case .challenge(_, let record):
            let task = taskObject(for: record)
            task.update(record)
            deliveryQueue.async { self.askAboutChallenge(record.pendingChallenge, of: task) }
        case .retryHeaders(_, let record):
            let task = taskObject(for: record)
            task.update(record)
            deliveryQueue.async { self.askForRetryHeaders(task) }
        case .backlogDelivered:
            deliveryQueue.async { self.backlogDelivered() }
        case .invalidated(_, let failure):
            deliveryQueue.async { self.finishInvalidation(failure) }
        case .transfers:
            break // only for watchers; never routed to a session
        }
    }

    /// Hands one event to the delegate, unless it already saw it (S3.4), then records and acknowledges it.
    private func deliver(_ event: EventRecord) {
        let alreadySeen = state.withLock { state -> Bool in
            state.receivedThrough = max(state.receivedThrough, event.number)
            return event.number <= state.deliveredThrough
        }
        if alreadySeen {
            log.info("delivery", "event \(event.number) already delivered; not shown again", session: identifier.rawValue, task: event.task.taskIdentifier)
        } else {
            let task = taskObject(for: event.task)
            task.update(event.task)
            let error = event.error.map { $0.urlError(failingURL: event.task.originalRequest.url, kind: event.task.kind) }
            task.finish(with: error)
            let interruptedPhase = state.withLock { state -> DeliveryPhase? in
                state.tasks.removeValue(forKey: event.task.taskIdentifier)
                return state.interrupted?.number == event.number ? state.interrupted?.phase : nil
            }
            if interruptedPhase != nil {
                log.notice("delivery", "event \(event.number) was interrupted in \(interruptedPhase!.rawValue) by the death of its last holder; not repeating what may have run", session: identifier.rawValue, task: task.taskIdentifier)
            }

            if let path = event.downloadedFile, event.error == nil, let download = task as? URLSessionDownloadTask {
                let exists = FileManager.default.fileExists(atPath: path)
                // A previous holder that died in didFinishDownloadingTo and took the file: done.
                if exists && interruptedPhase != .completing {
                    if let delegate = delegate as? URLSessionDownloadDelegate {
                        onDelegateQueue(marking: (event.number, .finishingDownload)) { session in
                            delegate.urlSession(session, downloadTask: download, didFinishDownloadingTo: URL(fileURLWithPath: path))
                        }
                    }
                    // The file exists only during the call (S3.3).
                    try? FileManager.default.removeItem(atPath: path)
                } else if !exists && interruptedPhase == nil {
                    log.error("delivery", "downloaded file \(path) is gone; didFinishDownloadingTo skipped", session: identifier.rawValue, task: task.taskIdentifier)
                }
            }
            // An upload's answer: given again if a holder died during the call (at least once).
            if let data = event.responseBody, !data.isEmpty, interruptedPhase != .completing,
               let upload = task as? URLSessionUploadTask, let delegate = delegate as? URLSessionDataDelegate {
                onDelegateQueue(marking: (event.number, .receivingData)) { session in
                    delegate.urlSession(session, dataTask: upload, didReceive: data)
                }
            }
            if interruptedPhase != .completing, let delegate = delegate as? URLSessionTaskDelegate {
                onDelegateQueue(marking: (event.number, .completing)) { session in delegate.urlSession(session, task: task, didCompleteWithError: error) }
            }
            state.withLock { $0.deliveredThrough = event.number }
            do {
                try RecordCoding.write(DeliveryRecord(deliveredThrough: event.number), to: deliveryRecordPath, syncDirectory: false, sync: false)
            } catch {
                log.error("delivery", "cannot record delivery of event \(event.number): \(error)", session: identifier.rawValue)
            }
        }
        if !state.withLock({ $0.acknowledgesOnCompletionHandler }) {
            acknowledge(through: event.number)
        }
    }

    /// Records, before a delegate call, which event and call are under way (atomic; it must
    /// survive this process's death, not a power cut).
    private func markDelivery(of number: UInt64, phase: DeliveryPhase) {
        let delivered = state.withLock { $0.deliveredThrough }
        do {
            try RecordCoding.write(DeliveryRecord(deliveredThrough: delivered, inProgress: number, phase: phase), to: deliveryRecordPath, syncDirectory: false, sync: false)
        } catch {
            log.error("delivery", "cannot record delivery of event \(number): \(error)", session: identifier.rawValue)
        }
    }

    /// Every event waiting at open was sent: if the app was launched for them, tell it (once).
    private func backlogDelivered() {
        defer {
            backlogCondition.lock()
            backlogHandled = true
            backlogCondition.broadcast()
            backlogCondition.unlock()
        }
        let shouldTell = state.withLock { state -> Bool in
            guard state.acknowledgesOnCompletionHandler, !state.finishEventsDelivered else { return false }
            state.finishEventsDelivered = true
            return true
        }
        guard shouldTell else { return }
        onDelegateQueue { session in self.delegate?.urlSessionDidFinishEvents(forBackgroundURLSession: session) }
    }

    /// The app called the completion handler it was given at launch: every event it has
    /// received counts as delivered.
    func completionHandlerCalled() {
        deliveryQueue.sync {
            let through = state.withLock { state -> UInt64 in
                state.acknowledgesOnCompletionHandler = false
                return state.receivedThrough
            }
            acknowledge(through: through)
        }
    }

    private func acknowledge(through number: UInt64) {
        guard number > state.withLock({ $0.acknowledgedThrough }) else { return }
        do {
            try connection().request(.acknowledge(session: identifier, through: number))
            state.withLock { $0.acknowledgedThrough = max($0.acknowledgedThrough, number) }
        } catch {
            log.error("delivery", "cannot acknowledge events through \(number): \(error)", session: identifier.rawValue)
        }
    }

    /// Runs a delegate call on the delegate queue and waits for it, keeping events in order.
    /// With `marking`, records the event and call as under way right before the call starts
    /// (on the delegate queue, so that no queueing delay lies between the mark and the call).
    func onDelegateQueue(marking mark: (number: UInt64, phase: DeliveryPhase)? = nil, _ call: @escaping @Sendable (URLSession) -> Void) {
        guard let session = primary else { return }
        let operation = BlockOperation { [self] in
            if let mark { markDelivery(of: mark.number, phase: mark.phase) }
            call(session)
        }
        delegateQueue.addOperations([operation], waitUntilFinished: true)
    }

    /// Waits until the events that were waiting when the session was opened have been handed
    /// to the delegate; false on timeout.
    func waitForBacklog(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        backlogCondition.lock()
        defer { backlogCondition.unlock() }
        while !backlogHandled {
            if !backlogCondition.wait(until: deadline) { return backlogHandled }
        }
        return true
    }

    /// Waits until every push received so far has been handed to the delegate.
    func drainDeliveries() {
        deliveryQueue.sync {}
    }

    // MARK: Invalidation

    func invalidate(cancelTasks: Bool) {
        let proceed = state.withLock { state -> Bool in
            guard !state.invalidating && !state.invalidated else { return false }
            state.invalidating = true
            return true
        }
        guard proceed else { return }
        do {
            _ = try request(.invalidate(session: identifier, cancelTasks: cancelTasks))
        } catch {
            log.error("session", "invalidate failed: \(error)", session: identifier.rawValue)
            deliveryQueue.async { self.finishInvalidation(nil) }
        }
    }

    /// The daemon refused to open the session (who we are, the identifier's owner, the app
    /// group): it is invalid from the start, and the delegate hears why.
    func openingRefused(_ failure: TransferFailure) {
        state.withLock { $0.invalidating = true }
        deliveryQueue.async { self.finishInvalidation(failure) }
    }

    private func finishInvalidation(_ failure: TransferFailure?) {
        let first = state.withLock { state -> Bool in
            guard !state.invalidated else { return false }
            state.invalidated = true
            return true
        }
        guard first else { return }
        state.withLock { $0.connection }?.unsubscribe(identifier)
        onDelegateQueue { session in self.delegate?.urlSession(session, didBecomeInvalidWithError: failure?.urlError()) }
        // Only now is it safe to open the identifier again (S1.3).
        SessionCoordinator.shared.release(layout: layout, family: family, identifier: identifier)
        log.notice("session", "invalidated", session: identifier.rawValue)
        strongPrimary = nil
    }
}
