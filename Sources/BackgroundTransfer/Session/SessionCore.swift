import Foundation
import FoundationNetworking
import TransferContainer
import TransferLogging
import TransferPOSIX

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
    let deliveryQueue: DispatchQueue
    let layout: ContainerLayout
    let family: BundleIdentifier
    let log: TransferLog
    let recordConfiguration: SessionConfiguration
    /// The session's data tasks, which run in this process (S2.2).
    let dataTasks = BackgroundDataTasks()

    struct State {
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
        /// The batch of events this process was launched (or woken) for; nil when it was not
        /// launched for this session's events (S3.2).
        var launch: LaunchBatch?
        /// True while the app, launched for this session's events, has not called the
        /// completion handler: events are then acknowledged only by that call (S3.2, S3.4).
        var acknowledgesOnCompletionHandler: Bool { launch?.acknowledgesOnCompletionHandler ?? false }
        var invalidated = false
        var invalidating = false
        /// An event whose delivery a previous holder did not finish, and the call it was in.
        var interrupted: (number: UInt64, phase: DeliveryPhase)?
        /// The identifier the next task gets: this process alone creates the session's tasks.
        var nextTaskIdentifier = 1
        /// Said on stderr that events are acknowledged with no delegate to hand them to (once).
        var toldOfMissingDelegate = false
    }

    /// Requests sent without waiting (creations, resumes, property changes, acknowledgements),
    /// kept in order until answered, so that a daemon restart loses none of them.
    struct Pipeline {
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
    let pipeline = Locked(Pipeline())
    /// Held from numbering a pipelined request to handing it to the socket, so that requests
    /// go out in number order; never held while waiting for a reply.
    let pipelineOrder = NSLock()
    let pipelineAnswered = NSCondition()

    let state = Locked(State())
    /// Signalled when the events waiting at open have all been handed to the delegate.
    let backlogCondition = NSCondition()
    var backlogHandled = false

    /// `Sessions/<family>/<identifier>/delivered.json`: which events the delegate has seen,
    /// so that neither a process killed before acknowledging nor a power cut that takes the
    /// daemon's record of an acknowledgement shows one twice (S3.4; synced before each). Written
    /// before each delegate call too (`inProgress`, `phase`): a process killed inside a
    /// delegate call must not repeat that call when the event is replayed.
    struct DeliveryRecord: Codable {
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
    let deliveryRecord: InPlaceRecord<DeliveryRecord>

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
            if launchedForEvents { $0.launch = LaunchBatch() }
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
        let withoutDelegate: Bool? = delegate == nil ? true : nil
        let opening = DaemonRequest.openSession(identifier: identifier, configuration: recordConfiguration,
                                                launchedForEvents: launched, withoutDelegate: withoutDelegate)
        let reply = try connection.request(opening)
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
            log.notice("session", "reattached after the daemon restarted", session: identifier.rawValue, event: LogEvent(.reattached))
        } catch {
            log.error("session", "cannot reattach: \(error)", session: identifier.rawValue)
        }
    }

    /// Sends a request, riding through a daemon restart: while the connection is lost, or
    /// before this session has reattached, it waits and sends again (for up to 15 s). A
    /// `resume()` must not be lost because the daemon was being restarted at that instant.
    /// (A `createTask` whose reply was lost can be created twice; losing it would be worse.)
    func request(_ request: DaemonRequest) throws(TransferFailure) -> DaemonReply {
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
            log.error("session", "cancel failed: \(error)", session: identifier.rawValue, task: task.taskIdentifier, event: LogEvent(.requestFailed, code: error.code))
        }
        return nil
    }

    func propertiesChanged(of task: URLSessionTask) {
        guard task.state != .completed else { return }
        sendInOrder(.setTaskProperties(session: identifier, task: task.taskIdentifier, TaskProperties(of: task.record)), for: task)
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
            log.error("session", "invalidate failed: \(error)", session: identifier.rawValue, event: LogEvent(.requestFailed, code: error.code))
            deliveryQueue.async { self.finishInvalidation(nil) }
        }
    }

    /// The daemon refused to open the session (who we are, the identifier's owner, the app
    /// group): it is invalid from the start, and the delegate hears why.
    func openingRefused(_ failure: TransferFailure) {
        state.withLock { $0.invalidating = true }
        deliveryQueue.async { self.finishInvalidation(failure) }
    }

    func finishInvalidation(_ failure: TransferFailure?) {
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
