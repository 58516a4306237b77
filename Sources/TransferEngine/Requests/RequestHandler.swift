import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging
import TransferTransport

/// What the request handler asks of the parts it does not hold: the table of sessions, and
/// the transfers, scheduling, the app's answers and inspection its requests reach.
/// `TransferDaemon` answers on the loop thread, forwarding to those parts.
protocol RequestHandlerSurroundings: AnyObject {
    /// The sessions: requests name them; opening one may add one.
    var sessions: [SessionKey: DaemonSession] { get set }
    /// A developer tool watches every transfer (`Watchers`).
    func startWatching(_ connection: ClientConnection, afterReply: inout [() -> Void]) -> DaemonReply
    /// The simulated device conditions changed: what may run is looked at again (`Scheduler`).
    func deviceConditionsChanged()
    /// A resumed task may start now (`Scheduler`).
    func requestScheduling(of task: TaskRecord, in session: DaemonSession)
    /// A new priority or begin date may change what runs next (`Scheduler`).
    func requestScheduling()
    /// A suspended task's transfer stops, what it learnt kept in its record (`RunningTransfers`).
    func pauseTransfer(_ key: TaskKey)
    /// A task refused at creation fails as it is resumed (`TaskCompletion`).
    func failTask(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure)
    /// Ends a task with `failure`, with resume data when asked and possible (`TaskCompletion`).
    @discardableResult
    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure, keepResumeData: Bool) throws -> Data?
    /// Tells the holder that the session is invalidated once no task is left (`TaskCompletion`).
    func finishInvalidationIfDone(_ session: DaemonSession)
    /// Takes an upload's file for a new task (`Uploads`); a refusal fails the task when resumed.
    func takeUploadBody(_ path: String?, into task: inout TaskRecord, in session: DaemonSession, for identity: AppIdentity) -> TransferFailure?
    /// Keeps a download's request body beside the session (`Downloads`); a refusal fails the task when resumed.
    func keepRequestBody(_ body: Data, of task: TaskRecord, in session: DaemonSession) -> TransferFailure?
    /// The app's answer to `willBeginDelayedRequest` (`DelayedRequests`).
    func answerDelayedRequest(_ answer: DelayedRequestAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord?
    /// The app's answer to an authentication challenge (`Challenges`).
    func answerChallenge(_ answer: ChallengeAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord?
    /// The app's fresh header fields for a retried request (`Challenges`).
    func answerRetryHeaders(_ fields: [HeaderField]?, for taskID: Int, in session: DaemonSession) throws -> TaskRecord?
    /// `getAllTasks`: the session's unfinished tasks, with running transfers' counts (`TaskListing`).
    func taskSummaries(of session: DaemonSession) -> TaskSummaries
    /// `getTasks`: the records of the tasks asked for, with running transfers' counts (`TaskListing`).
    func taskRecords(_ identifiers: [Int], of session: DaemonSession) -> [TaskRecord]
}

/// What the daemon does for each request a client sends: who may ask what, and the answer.
/// Split by request: a hello (`+Hello`), opening a session (`+OpenSession`), creating a task
/// (`+CreateTask`), a force quit (`+ForceQuit`); the rest here. Owned by the daemon's loop thread.
final class RequestHandler {
    unowned let surroundings: any RequestHandlerSurroundings
    let layout: ContainerLayout
    let log: TransferLog
    let root: RootDirectory
    let clock: any TimeSource
    /// The apps known, and which are force-quit.
    let registry: AppRegistry
    /// Who a peer is, by its executable's entitlements.
    let peers: PeerIdentifier
    /// While commits fail, changes are refused.
    let commits: GroupCommit
    let delivery: EventDelivery
    /// A force quit disconnects the app's processes.
    let clients: ClientServer
    /// A session left in its folder is taken up as it is opened.
    let sessionRecovery: SessionRecovery
    /// The rate limiter and the launches made for events.
    let relauncher: Relauncher
    let resumeData: ResumeDataStore
    let quotas: AppQuotas
    let byteBudget: AppByteBudget
    /// Bytes a new task leaves free (`TransferDaemon.Options.freeSpaceReserve`).
    let freeSpaceReserve: Int64

    init(surroundings: any RequestHandlerSurroundings, layout: ContainerLayout, log: TransferLog, root: RootDirectory, clock: any TimeSource,
         registry: AppRegistry, peers: PeerIdentifier, commits: GroupCommit, delivery: EventDelivery, clients: ClientServer,
         sessionRecovery: SessionRecovery, relauncher: Relauncher, resumeData: ResumeDataStore,
         maximumTasksPerApp: Int, maximumBytesPerApp: Int, freeSpaceReserve: Int64) {
        self.surroundings = surroundings
        self.layout = layout
        self.log = log
        self.root = root
        self.clock = clock
        self.registry = registry
        self.peers = peers
        self.commits = commits
        self.delivery = delivery
        self.clients = clients
        self.sessionRecovery = sessionRecovery
        self.relauncher = relauncher
        self.resumeData = resumeData
        self.quotas = AppQuotas(maximumTasksPerApp: maximumTasksPerApp) { [unowned surroundings] in surroundings.sessions }
        self.byteBudget = AppByteBudget(budget: maximumBytesPerApp) { [unowned surroundings] in surroundings.sessions }
        self.freeSpaceReserve = freeSpaceReserve
    }

    func handle(_ request: DaemonRequest, from connection: ClientConnection, afterReply: inout [() -> Void]) throws -> DaemonReply {
        if case .hello(let hello) = request { return try welcome(hello, connection) }
        if case .ping = request { return .ok }
        // Everything else needs a verified hello: it changes something, or shows what others do.
        guard let hello = connection.hello else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "say hello first: the daemon does not know who you are")
        }
        // While the disk refuses commits, a change could be neither made durable nor
        // answered: it is refused at once, and the rest goes on.
        if let failure = commits.failure {
            switch change(of: request) {
            case .none: break
            case .session(let identifier):
                let directory = layout.sessionDirectory(family: hello.identity.family, identifier: identifier)
                throw JournalReserve.cannotRecord(failure, writing: JournalContents.path(inSession: directory))
            case .sessions: throw JournalReserve.cannotRecord(failure, writing: layout.root.path)
            }
        }
        if case .forceQuit(let app) = request {
            // The user's force quit comes from the developer tool (bgtransfer), or from the app family itself.
            guard hello.identity.kind == .tool || registry.family(of: app) == hello.identity.family else {
                throw refusal(of: "force-quit \(app)", by: hello, connection)
            }
            return try forceQuit(app)
        }
        if case .watch = request {
            // Every family's transfers, URLs and all: for the developer's tool only.
            guard hello.identity.kind == .tool else { throw refusal(of: "watch every app's transfers", by: hello, connection) }
            return surroundings.startWatching(connection, afterReply: &afterReply)
        }
        if case .conditionsChanged = request {
            guard hello.identity.kind == .tool else { throw refusal(of: "change the device conditions", by: hello, connection) }
            surroundings.deviceConditionsChanged()
            return .ok
        }
        guard hello.identity.kind != .tool else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "\(hello.identity.bundleIdentifier) is a tool: it holds no sessions", subject: hello.identity.bundleIdentifier.rawValue)
        }
        switch request {
        case .hello, .ping, .forceQuit, .watch, .conditionsChanged:
            return .ok
        case .openSession(let identifier, let configuration, let launchedForEvents, let withoutDelegate):
            let session = try open(identifier, configuration, for: hello, connection,
                                   launchedForEvents: launchedForEvents, withoutDelegate: withoutDelegate == true)
            afterReply.append { [unowned self] in delivery.deliverBacklog(of: session) }
            let identifiers = session.tasks.keys.sorted()
            let page = identifiers.prefix(DaemonReply.tasksPerPage).compactMap { session.tasks[$0] }
            let first = Array(page.prefix(DaemonReply.pageLength(of: page)))
            let more = identifiers.count > first.count ? Array(identifiers.dropFirst(first.count)) : nil
            return .sessionOpened(tasks: first, nextTaskIdentifier: session.nextTaskIdentifier, moreTasks: more)
        case .createTask(let identifier, let creation):
            return try createTask(creation, in: heldSession(identifier, connection), by: hello)
        case .resumeTask(let identifier, let taskID):
            let session = try heldSession(identifier, connection)
            var task = try existingTask(taskID, in: session)
            if let failure = task.pendingFailure {
                surroundings.failTask(task, in: session, failure)
                return .task(session.taskOrEnding(taskID) ?? task) // as it ended: never shown accepted and waiting
            }
            if task.state == .suspended {
                task.state = .running
                session.update(task)
                log.info("tasks", "resumed", session: identifier.rawValue, task: taskID)
                surroundings.requestScheduling(of: task, in: session)
            }
            return .task(session.tasks[taskID] ?? task)
        case .suspendTask(let identifier, let taskID):
            let session = try heldSession(identifier, connection)
            var task = try existingTask(taskID, in: session)
            if task.state == .running {
                surroundings.pauseTransfer(TaskKey(session: session.key, task: taskID))
                task = session.tasks[taskID] ?? task
                task.state = .suspended
                session.update(task)
                log.info("tasks", "suspended", session: identifier.rawValue, task: taskID)
            }
            return .task(session.tasks[taskID] ?? task)
        case .cancelTask(let identifier, let taskID, let produceResumeData):
            let session = try heldSession(identifier, connection)
            guard session.tasks[taskID] != nil else { return .cancelled(resumeData: nil) } // already finished
            let resumeData = try surroundings.cancelTask(taskID, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled"), keepResumeData: produceResumeData)
            return .cancelled(resumeData: resumeData)
        case .setTaskProperties(let identifier, let taskID, let properties):
            let session = try heldSession(identifier, connection)
            var task = try existingTask(taskID, in: session)
            properties.apply(to: &task)
            session.update(task)
            surroundings.requestScheduling() // a new priority or date may change what runs next
            return .task(session.tasks[taskID] ?? task)
        case .answerDelayedRequest(let identifier, let taskID, let answer):
            let session = try heldSession(identifier, connection)
            guard let task = try surroundings.answerDelayedRequest(answer, for: taskID, in: session) else { return .ok }
            return .task(task)
        case .answerChallenge(let identifier, let taskID, let answer):
            let session = try heldSession(identifier, connection)
            let task = try surroundings.answerChallenge(answer, for: taskID, in: session)
            delivery.sayBacklogDeliveredIfSettled(session) // an answer that let the task go on
            guard let task else { return .ok }
            return .task(task)
        case .answerRetryHeaders(let identifier, let taskID, let fields):
            let session = try heldSession(identifier, connection)
            guard let task = try surroundings.answerRetryHeaders(fields, for: taskID, in: session) else { return .ok }
            return .task(task)
        case .getAllTasks(let identifier):
            let session = try heldSession(identifier, connection)
            var summaries = surroundings.taskSummaries(of: session)
            if hello.readsCompactSummaries == true { summaries.form = .compact }
            return .taskSummaries(summaries)
        case .getTasks(let identifier, let identifiers):
            let session = try heldSession(identifier, connection)
            let all = surroundings.taskRecords(identifiers, of: session)
            let records = Array(all.prefix(DaemonReply.pageLength(of: all))) // the client asks again for those after
            log.info("tasks", "getTasks: the records of \(records.count) of the \(identifiers.count) tasks asked for", session: identifier.rawValue)
            return .tasks(records)
        case .acknowledge(let identifier, let through):
            try delivery.acknowledge(through: through, in: heldSession(identifier, connection))
            return .ok
        case .invalidate(let identifier, let cancelTasks):
            let session = try heldSession(identifier, connection)
            session.invalidateWhenDone = true
            if cancelTasks {
                for task in session.unfinishedTasks {
                    try surroundings.cancelTask(task.taskIdentifier, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled"), keepResumeData: false)
                }
            }
            afterReply.append { [unowned self] in surroundings.finishInvalidationIfDone(session) }
            return .ok
        case .closeSession(let identifier):
            if let session = surroundings.sessions[SessionKey(family: hello.identity.family, identifier: identifier)], session.holder === connection {
                session.holder = nil
                connection.attachedSessions.remove(session.key)
            }
            return .ok
        }
    }

    /// What a request changes of the journals' records, and so needs a commit before its
    /// answer: nothing (answered while the disk refuses commits), one session of the
    /// requester's, or the sessions of a whole app family (a force quit). A creation is
    /// checked in its own case, once one sent again (already accepted) has been answered.
    private enum Change {
        case none
        case session(SessionIdentifier)
        case sessions
    }

    private func change(of request: DaemonRequest) -> Change {
        switch request {
        case .hello, .ping, .watch, .conditionsChanged, .openSession, .closeSession, .getAllTasks, .getTasks, .createTask:
            return .none
        case .invalidate(let session, let cancelTasks):
            return cancelTasks ? .session(session) : .none // finishing first is a flag in memory
        case .resumeTask(let session, _), .suspendTask(let session, _), .cancelTask(let session, _, _), .setTaskProperties(let session, _, _),
             .answerDelayedRequest(let session, _, _), .answerChallenge(let session, _, _), .answerRetryHeaders(let session, _, _), .acknowledge(let session, _):
            return .session(session)
        case .forceQuit:
            return .sessions
        }
    }

    /// A request a verified peer may not make; logged (category `trust`).
    private func refusal(of what: String, by hello: ClientHello, _ connection: ClientConnection) -> TransferFailure {
        let message = "\(hello.identity.bundleIdentifier) (process \(connection.pid ?? -1)) may not \(what)"
        log.error("trust", "refused: \(message)")
        return TransferFailure(code: TransferFailure.requestRefused, message: message, subject: hello.identity.bundleIdentifier.rawValue)
    }

    private func heldSession(_ identifier: SessionIdentifier, _ connection: ClientConnection) throws -> DaemonSession {
        guard let family = connection.hello?.identity.family,
              let session = surroundings.sessions[SessionKey(family: family, identifier: identifier)], session.holder === connection else {
            throw TransferFailure.sessionNotOpen(identifier.rawValue)
        }
        return session
    }

    private func existingTask(_ taskID: Int, in session: DaemonSession) throws -> TaskRecord {
        guard let task = session.tasks[taskID] else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "no unfinished task \(taskID) in session \(session.key.identifier)", subject: "\(taskID)")
        }
        return task
    }

    /// What background sessions cannot do (S2.1, S2.3): the task is created, and fails with
    /// this error when resumed.
    func refusal(of creation: TaskCreation) -> TransferFailure? {
        let url = creation.request.url
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            return TransferFailure(code: TransferFailure.badURL, message: "malformed URL \"\(url)\"", subject: url)
        }
        guard scheme == "http" || scheme == "https" else {
            return TransferFailure(code: TransferFailure.unsupportedURL, message: "unsupported URL scheme \"\(scheme)\": background sessions transfer http and https only", subject: url)
        }
        guard let host = components.host, !host.isEmpty else {
            return TransferFailure(code: TransferFailure.badURL, message: "URL \"\(url)\" has no host", subject: url)
        }
        return nil
    }
}
