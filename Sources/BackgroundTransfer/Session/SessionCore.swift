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
    /// The session's data tasks, which run in this process (S2.2).
    let dataTasks = BackgroundDataTasks()

    private struct State {
        var connection: DaemonConnection?
        var tasks: [Int: URLSessionTask] = [:]
        /// The highest event number the delegate has seen (durable in `delivered.json`).
        var deliveredThrough: UInt64 = 0
        /// The highest event number received from the daemon (delivered or a duplicate).
        var receivedThrough: UInt64 = 0
        /// The highest acknowledgement sent (the pipeline sends it again if it is lost).
        var acknowledgedThrough: UInt64 = 0
        /// An acknowledgement waiting for the deliveries queued behind it (`acknowledgeSoon`).
        var acknowledgementDue: UInt64?
        /// True while the app, launched for this session's events, has not called the
        /// completion handler: events are then acknowledged only by that call (S3.2, S3.4).
        var acknowledgesOnCompletionHandler = false
        var finishEventsDelivered = false
        var invalidated = false
        var invalidating = false
        /// An event whose delivery a previous holder did not finish, and the call it was in.
        var interrupted: (number: UInt64, phase: DeliveryPhase)?
        /// The identifier the next task gets: this process alone creates the session's tasks.
        var nextTaskIdentifier = 1
    }

    /// Requests sent without waiting (creations, resumes, property changes, acknowledgements),
    /// kept in order until answered, so that a daemon restart loses none of them.
    private struct Pipeline {
        struct Entry {
            var number: UInt64
            var request: DaemonRequest
            var task: URLSessionTask?
        }
        var unanswered: [Entry] = []
        var nextNumber: UInt64 = 1
        /// Bumped by every resend: answers to earlier sendings no longer stall the pipeline.
        var epoch = 0
        /// The connection was lost with requests unanswered: new ones wait for the reattach.
        var stalled = false
    }
    private let pipeline = Locked(Pipeline())
    /// Held from numbering a pipelined request to handing it to the socket, so that requests
    /// go out in number order; never held while waiting for a reply.
    private let pipelineOrder = NSLock()
    private let pipelineAnswered = NSCondition()

    private let state = Locked(State())
    /// Signalled when the events waiting at open have all been handed to the delegate.
    private let backlogCondition = NSCondition()
    private var backlogHandled = false

    /// `Sessions/<family>/<identifier>/delivered.json`: which events the delegate has seen,
    /// so that neither a process killed before acknowledging nor a power cut that takes the
    /// daemon's record of an acknowledgement shows one twice (S3.4; synced before each). Written
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

    /// `delivered.json`, rewritten in place before and after each delegate call.
    private let deliveryRecord: InPlaceRecord<DeliveryRecord>

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
        self.deliveryRecord = InPlaceRecord(path: environment.layout.sessionDirectory(family: environment.identity.family, identifier: identifier).appendingPathComponent("delivered.json").path)
        let record = try? deliveryRecord.read()
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
        dataTasks.attach(to: self, ledgerPath: layout.sessionDirectory(family: family, identifier: identifier).appendingPathComponent("data-tasks.json").path, deliveryQueue: deliveryQueue)
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
        guard case .sessionOpened(let records, let next, let more) = reply else { return }
        state.withLock { $0.nextTaskIdentifier = max($0.nextTaskIdentifier, next, dataTasks.nextIdentifier) }
        for record in try records + connection.taskRecords(more ?? [], of: identifier) { _ = taskObject(for: record) }
    }

    /// After the daemon restarted: open again; undelivered events are replayed (and
    /// deduplicated); unanswered requests are sent again, in order.
    private func reattach() {
        guard let connection = state.withLock({ $0.invalidated ? nil : $0.connection }) else { return }
        do {
            try open(on: connection)
            resendUnanswered(on: connection)
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
        acknowledgeDue() // first, as before any request when deliveries acknowledged at once
        let deadline = Date().addingTimeInterval(15)
        while true {
            do {
                return try connection().request(request)
            } catch {
                guard Self.isTransient(error), Date() < deadline, !state.withLock({ $0.invalidated }) else { throw error }
                usleep(50_000) // the connection reconnects and the session reattaches by themselves
            }
        }
    }

    func connection() throws(TransferFailure) -> DaemonConnection {
        guard let connection = state.withLock({ $0.connection }) else {
            throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "session \(identifier) is not attached to the transfer daemon", subject: identifier.rawValue)
        }
        return connection
    }

    var isInvalidated: Bool { state.withLock { $0.invalidated || $0.invalidating } }
    /// The task objects of this process's unfinished tasks, by identifier.
    var knownTasks: [Int: URLSessionTask] { state.withLock { $0.tasks } }

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

    /// Creates the task here at once, as Apple's `downloadTask(with:)` does, and in the
    /// daemon without waiting: the daemon makes it durable before it answers, and `flush`
    /// waits for that. A creation the daemon refuses completes the task with the refusal.
    func createTask(_ creation: TaskCreation) throws(TransferFailure) -> URLSessionTask {
        var creation = creation
        creation.taskIdentifier = state.withLock { state in
            defer { state.nextTaskIdentifier += 1 }
            return state.nextTaskIdentifier
        }
        let task = taskObject(for: TaskRecord(taskIdentifier: creation.taskIdentifier!, creation: creation))
        sendInOrder(.createTask(session: identifier, creation), for: task)
        return task
    }

    func reserveTaskIdentifier() -> Int {
        state.withLock { state in
            defer { state.nextTaskIdentifier += 1 }
            return state.nextTaskIdentifier
        }
    }

    func resume(_ task: URLSessionTask) {
        guard task.state == .suspended else { return }
        task.setState(.running) // as on Apple's systems, at once; the daemon's answer has the last word
        sendInOrder(.resumeTask(session: identifier, task: task.taskIdentifier), for: task)
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
        sendInOrder(.setTaskProperties(session: identifier, task: task.taskIdentifier, TaskProperties(of: task.record)), for: task)
    }

    // MARK: Pipelined requests

    /// Sends a request without waiting for its answer, after every request sent this way
    /// before it; the answer updates `task`. Lost with the connection, it is sent again once
    /// the session has reattached (the daemon takes each of these requests twice harmlessly).
    private func sendInOrder(_ request: DaemonRequest, for task: URLSessionTask?) {
        pipelineOrder.lock()
        defer { pipelineOrder.unlock() }
        let (number, epoch, stalled) = pipeline.withLock { pipeline in
            let number = pipeline.nextNumber
            pipeline.nextNumber += 1
            pipeline.unanswered.append(.init(number: number, request: request, task: task))
            return (number, pipeline.epoch, pipeline.stalled)
        }
        guard !stalled, let connection = state.withLock({ $0.connection }) else { return }
        transmit(request, number: number, epoch: epoch, on: connection)
    }

    private func transmit(_ request: DaemonRequest, number: UInt64, epoch: Int, on connection: DaemonConnection) {
        connection.send(request) { [weak self] result in self?.answered(number, epoch: epoch, result) }
    }

    /// Runs on the connection's reader thread.
    private func answered(_ number: UInt64, epoch: Int, _ result: Result<DaemonReply, TransferFailure>) {
        if case .failure(let failure) = result, Self.isTransient(failure) {
            pipeline.withLock { if $0.epoch == epoch { $0.stalled = true } }
            return
        }
        let entry = pipeline.withLock { pipeline -> Pipeline.Entry? in
            guard let index = pipeline.unanswered.firstIndex(where: { $0.number == number }) else { return nil } // answered already
            return pipeline.unanswered.remove(at: index)
        }
        // The task takes the answer before `waitForAnswers` returns: a caller that waited
        // sees a refused creation as completed with its error, never as accepted.
        if let entry {
            switch result {
            case .success(.task(let record)):
                entry.task?.update(record)
            case .success:
                break
            case .failure(let failure):
                refused(entry, failure)
            }
        }
        pipelineAnswered.lock()
        pipelineAnswered.broadcast()
        pipelineAnswered.unlock()
    }

    /// The daemon refused a pipelined request: a refused creation completes its task.
    private func refused(_ entry: Pipeline.Entry, _ failure: TransferFailure) {
        // The request's name only: its payload may hold a credential or a token.
        log.error("session", "\(String(describing: entry.request).prefix { $0 != "(" }) failed: \(failure)", session: identifier.rawValue, task: entry.task?.taskIdentifier)
        guard case .createTask = entry.request, let task = entry.task else { return }
        let error = failure.urlError(failingURL: task.record.originalRequest.url, kind: task.record.kind)
        task.noteRefusedByDaemon()
        task.setState(.completed)
        task.finish(with: error)
        state.withLock { _ = $0.tasks.removeValue(forKey: task.taskIdentifier) }
        deliveryQueue.async {
            guard let delegate = self.delegate as? URLSessionTaskDelegate else { return }
            self.onDelegateQueue { session in delegate.urlSession(session, task: task, didCompleteWithError: error) }
        }
    }

    /// After a reattach: every unanswered request goes again, in order, before any new one.
    private func resendUnanswered(on connection: DaemonConnection) {
        pipelineOrder.lock()
        defer { pipelineOrder.unlock() }
        let (entries, epoch) = pipeline.withLock { pipeline in
            pipeline.epoch += 1
            pipeline.stalled = false
            return (pipeline.unanswered, pipeline.epoch)
        }
        for entry in entries { transmit(entry.request, number: entry.number, epoch: epoch, on: connection) }
    }

    /// Waits until the daemon has answered every pipelined request sent before the call
    /// (each answer comes after the change is durable); false on timeout.
    func waitForAnswers(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        let mark = pipeline.withLock { $0.nextNumber }
        pipelineAnswered.lock()
        defer { pipelineAnswered.unlock() }
        while pipeline.withLock({ ($0.unanswered.first?.number ?? mark) < mark }) {
            if !pipelineAnswered.wait(until: deadline) { return false }
        }
        return true
    }

    static func isTransient(_ failure: TransferFailure) -> Bool {
        failure.code == TransferFailure.networkConnectionLost
            || (failure.code == TransferFailure.requestRefused && failure.message.contains("is not open in this process"))
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

            // The event names the file relative to the container (absolute in older records):
            // the delegate gets it in this process's container, never a file outside it.
            let downloadedPath = event.downloadedFile.flatMap(layout.resolveRecordPath)
            if let stored = event.downloadedFile, downloadedPath == nil {
                log.error("delivery", "downloaded file \(stored) lies outside the container \(layout.root.path); refused, didFinishDownloadingTo skipped", session: identifier.rawValue, task: task.taskIdentifier)
            }
            if let path = downloadedPath, event.error == nil, let download = task as? URLSessionDownloadTask {
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
                let metrics = URLSessionTaskMetrics(task: event.task, endedAt: event.createdAt, request: task.currentRequest, response: task.response)
                onDelegateQueue(marking: (event.number, .completing)) { session in
                    delegate.urlSession(session, task: task, didFinishCollecting: metrics)
                    delegate.urlSession(session, task: task, didCompleteWithError: error)
                }
            }
            state.withLock { $0.deliveredThrough = event.number }
            do {
                try deliveryRecord.write(DeliveryRecord(deliveredThrough: event.number))
            } catch {
                log.error("delivery", "cannot record delivery of event \(event.number): \(error)", session: identifier.rawValue)
            }
        }
        if !state.withLock({ $0.acknowledgesOnCompletionHandler }) { acknowledgeSoon(through: event.number) }
    }

    /// Acknowledges through `number` once the deliveries already queued are done: a burst of
    /// events costs one sync of `delivered.json` and one request, not one of each per event.
    private func acknowledgeSoon(through number: UInt64) {
        let schedule = state.withLock { state -> Bool in
            defer { state.acknowledgementDue = max(state.acknowledgementDue ?? 0, number) }
            return state.acknowledgementDue == nil
        }
        if schedule { deliveryQueue.async { self.acknowledgeDue() } }
    }

    /// Sends the acknowledgement `acknowledgeSoon` left waiting, if any. Any thread: what it
    /// acknowledges is recorded in `delivered.json` already.
    private func acknowledgeDue() {
        if let due = state.withLock({ state in defer { state.acknowledgementDue = nil }; return state.acknowledgementDue }) { acknowledge(through: due) }
    }

    /// Records, before a delegate call, which event and call are under way (atomic; it must
    /// survive this process's death, not a power cut).
    private func markDelivery(of number: UInt64, phase: DeliveryPhase) {
        let delivered = state.withLock { $0.deliveredThrough }
        do {
            try deliveryRecord.write(DeliveryRecord(deliveredThrough: delivered, inProgress: number, phase: phase))
        } catch {
            log.error("delivery", "cannot record delivery of event \(number): \(error)", session: identifier.rawValue)
        }
    }

    /// Every event waiting at open was sent: if the app was launched for them, tell it (once).
    private func backlogDelivered() {
        acknowledgeDue() // before whoever waits for the backlog goes on, and perhaps exits
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

    /// Tells the daemon, without waiting, that the events through `number` were handled.
    private func acknowledge(through number: UInt64) {
        let isNew = state.withLock { state -> Bool in
            guard number > state.acknowledgedThrough else { return false }
            state.acknowledgedThrough = number
            return true
        }
        guard isNew else { return }
        // On disk first: a power cut may take the daemon's record of this acknowledgement, and then only ours hides the events.
        do { try deliveryRecord.sync() } catch { log.error("delivery", "cannot make the delivery of events through \(number) durable: \(error)", session: identifier.rawValue) }
        sendInOrder(.acknowledge(session: identifier, through: number), for: nil)
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

    /// Waits until every push received so far has been handed to the delegate and the
    /// daemon has taken the acknowledgements.
    func drainDeliveries() {
        deliveryQueue.sync { acknowledgeDue() }
        _ = waitForAnswers(timeout: DaemonConnection.requestTimeout)
    }

    // MARK: Invalidation

    func invalidate(cancelTasks: Bool) {
        let proceed = state.withLock { state -> Bool in
            guard !state.invalidating && !state.invalidated else { return false }
            state.invalidating = true
            return true
        }
        guard proceed else { return }
        dataTasks.invalidate(cancelTasks: cancelTasks)
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
        let connection = state.withLock { $0.connection }
        connection?.unsubscribe(identifier)
        onDelegateQueue { session in self.delegate?.urlSession(session, didBecomeInvalidWithError: failure?.urlError()) }
        // Let go of the session in the daemon after the acknowledgements sent before this
        // (same pipeline): a session let go of with events unacknowledged would have the app
        // relaunched for events its delegate has already seen.
        acknowledgeDue()
        if connection != nil { sendInOrder(.closeSession(session: identifier), for: nil) }
        // Only now is it safe to open the identifier again (S1.3).
        SessionCoordinator.shared.release(layout: layout, family: family, identifier: identifier)
        log.notice("session", "invalidated", session: identifier.rawValue)
        strongPrimary = nil
    }
}
