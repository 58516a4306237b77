import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

/// What the daemon does for each request a client sends: who may ask what, and the answer.
/// Owned by the daemon's loop thread.
final class RequestHandler {
    unowned let daemon: TransferDaemon
    private lazy var quotas = AppQuotas(maximumTasksPerApp: daemon.options.maximumTasksPerApp) { [unowned daemon] in daemon.sessions }

    init(daemon: TransferDaemon) {
        self.daemon = daemon
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
        if let failure = daemon.commits.failure {
            switch change(of: request) {
            case .none: break
            case .session(let identifier):
                let directory = daemon.layout.sessionDirectory(family: hello.identity.family, identifier: identifier)
                throw JournalReserve.cannotRecord(failure, writing: JournalContents.path(inSession: directory))
            case .sessions: throw JournalReserve.cannotRecord(failure, writing: daemon.layout.root.path)
            }
        }
        if case .forceQuit(let app) = request {
            // The user's force quit comes from the developer tool (bgtransfer), or from the app family itself.
            guard hello.identity.kind == .tool || daemon.registry.family(of: app) == hello.identity.family else {
                throw refusal(of: "force-quit \(app)", by: hello, connection)
            }
            return try forceQuit(app)
        }
        if case .watch = request {
            // Every family's transfers, URLs and all: for the developer's tool only.
            guard hello.identity.kind == .tool else { throw refusal(of: "watch every app's transfers", by: hello, connection) }
            return daemon.watchers.startWatching(connection, afterReply: &afterReply)
        }
        if case .conditionsChanged = request {
            guard hello.identity.kind == .tool else { throw refusal(of: "change the device conditions", by: hello, connection) }
            daemon.scheduler.conditionsChanged()
            return .ok
        }
        guard hello.identity.kind != .tool else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "\(hello.identity.bundleIdentifier) is a tool: it holds no sessions", subject: hello.identity.bundleIdentifier.rawValue)
        }
        switch request {
        case .hello, .ping, .forceQuit, .watch, .conditionsChanged:
            return .ok
        case .openSession(let identifier, let configuration, let launchedForEvents):
            let session = try open(identifier, configuration, for: hello, connection, launchedForEvents: launchedForEvents)
            afterReply.append { [unowned self] in daemon.delivery.deliverBacklog(of: session) }
            let identifiers = session.tasks.keys.sorted()
            let first = identifiers.prefix(DaemonReply.tasksPerPage).compactMap { session.tasks[$0] }
            let more = identifiers.count > first.count ? Array(identifiers.dropFirst(first.count)) : nil
            return .sessionOpened(tasks: first, nextTaskIdentifier: session.nextTaskIdentifier, moreTasks: more)
        case .createTask(let identifier, let creation):
            let session = try heldSession(identifier, connection)
            guard !session.invalidateWhenDone else {
                throw TransferFailure(code: TransferFailure.requestRefused, message: "Attempted to create a task in a session that has been invalidated", subject: identifier.rawValue)
            }
            if let resent = creation.taskIdentifier.flatMap(session.taskOrEnding) { return .task(resent) } // sent again after a reconnect
            // Refused before any record is made, so a giant URL is not kept (in memory or on disk).
            if let oversized = TransferLimits.refusal(of: creation.request) ?? creation.requestBody.flatMap({ TransferLimits.refusal(ofBodyBytes: $0.count, url: creation.request.url) }) { throw oversized }
            try quotas.admitTask(of: session.record.owner, in: session)
            let journal = JournalContents.path(inSession: session.directory)
            if let failure = daemon.commits.failure { throw JournalReserve.cannotRecord(failure, writing: journal) }
            // A new task leaves the reserve to the lines that end the tasks already accepted.
            let reserve = JournalReserve(reserve: daemon.options.freeSpaceReserve)
            if let full = reserve.refusalOfNewTask(available: JournalReserve.availableSpace(at: session.directory.path), journal: journal) { throw full }
            var refusal = creation.resumeData == nil ? refusal(of: creation) : nil
            var task = try session.createTask(creation, inBackground: !hello.isForeground, pendingFailure: refusal, at: daemon.clock.now)
            if !hello.isForeground {
                // Work started in the background is discretionary, and waits out the rate limiter (S5, S6.5).
                task.requirements.isDiscretionary = true
                task.rateLimitedUntil = daemon.relauncher.rateLimitedStart(for: hello.identity)
                session.update(task)
            }
            if let blob = creation.resumeData {
                // The resume data says what to transfer; it is checked first, then its URL.
                refusal = daemon.resumeData.adoptResumeData(blob, into: &task, in: session, for: hello.identity)
                    ?? self.refusal(of: TaskCreation(kind: task.kind, request: task.originalRequest))
                task.pendingFailure = refusal
                session.update(task)
            } else if task.kind == .upload && refusal == nil {
                refusal = daemon.uploads.takeUploadBody(creation.uploadFile, into: &task, in: session, for: hello.identity)
                task.pendingFailure = refusal
                session.update(task)
            } else if let body = creation.requestBody, task.requestBodyLength != nil, refusal == nil,
                      let failure = daemon.downloads.keepRequestBody(body, of: task, in: session) {
                refusal = failure
                task.pendingFailure = failure
                session.update(task)
            }
            daemon.log.info("tasks", "created \(task.kind.rawValue) task \(task.taskIdentifier) for \(task.originalRequest.url)", session: identifier.rawValue, task: task.taskIdentifier)
            if let refusal { daemon.log.error("tasks", "task will fail when resumed: \(refusal.message)", session: identifier.rawValue, task: task.taskIdentifier) }
            // A client that chose the identifier built this very record itself, unless the
            // daemon has changed it since (resume data, an upload's body, background rules).
            let stored = session.tasks[task.taskIdentifier] ?? task
            return creation.taskIdentifier != nil && stored.revision == 0 ? .ok : .task(stored)
        case .resumeTask(let identifier, let taskID):
            let session = try heldSession(identifier, connection)
            var task = try existingTask(taskID, in: session)
            if let failure = task.pendingFailure {
                daemon.completion.fail(task, in: session, failure)
                return .task(task)
            }
            if task.state == .suspended {
                task.state = .running
                session.update(task)
                daemon.log.info("tasks", "resumed", session: identifier.rawValue, task: taskID)
                daemon.scheduler.scheduleTransfer(task, in: session)
            }
            return .task(session.tasks[taskID] ?? task)
        case .suspendTask(let identifier, let taskID):
            let session = try heldSession(identifier, connection)
            var task = try existingTask(taskID, in: session)
            if task.state == .running {
                daemon.transfers.stopTransfer(TaskKey(session: session.key, task: taskID))
                task = session.tasks[taskID] ?? task
                task.state = .suspended
                session.update(task)
                daemon.log.info("tasks", "suspended", session: identifier.rawValue, task: taskID)
            }
            return .task(session.tasks[taskID] ?? task)
        case .cancelTask(let identifier, let taskID, let produceResumeData):
            let session = try heldSession(identifier, connection)
            guard session.tasks[taskID] != nil else { return .cancelled(resumeData: nil) } // already finished
            let resumeData = try daemon.completion.cancel(taskID, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled"), keepResumeData: produceResumeData)
            return .cancelled(resumeData: resumeData)
        case .setTaskProperties(let identifier, let taskID, let properties):
            let session = try heldSession(identifier, connection)
            var task = try existingTask(taskID, in: session)
            properties.apply(to: &task)
            session.update(task)
            daemon.scheduler.scheduleTransfers() // a new priority or date may change what runs next
            return .task(session.tasks[taskID] ?? task)
        case .answerDelayedRequest(let identifier, let taskID, let answer):
            let session = try heldSession(identifier, connection)
            guard let task = try daemon.delayedRequests.answerDelayedRequest(answer, for: taskID, in: session) else { return .ok }
            return .task(task)
        case .answerChallenge(let identifier, let taskID, let answer):
            let session = try heldSession(identifier, connection)
            let task = try daemon.challenges.answerChallenge(answer, for: taskID, in: session)
            daemon.delivery.sayBacklogDeliveredIfSettled(session) // an answer that let the task go on
            guard let task else { return .ok }
            return .task(task)
        case .answerRetryHeaders(let identifier, let taskID, let fields):
            let session = try heldSession(identifier, connection)
            guard let task = try daemon.challenges.answerRetryHeaders(fields, for: taskID, in: session) else { return .ok }
            return .task(task)
        case .getAllTasks(let identifier):
            let session = try heldSession(identifier, connection)
            return .taskSummaries(daemon.listing.taskSummaries(of: session))
        case .getTasks(let identifier, let identifiers):
            let session = try heldSession(identifier, connection)
            let records = daemon.listing.taskRecords(identifiers, of: session)
            daemon.log.info("tasks", "getTasks: the records of \(records.count) of the \(identifiers.count) tasks asked for", session: identifier.rawValue)
            return .tasks(records)
        case .acknowledge(let identifier, let through):
            try daemon.delivery.acknowledge(through: through, in: heldSession(identifier, connection))
            return .ok
        case .invalidate(let identifier, let cancelTasks):
            let session = try heldSession(identifier, connection)
            session.invalidateWhenDone = true
            if cancelTasks {
                for task in session.unfinishedTasks {
                    try daemon.completion.cancel(task.taskIdentifier, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled"))
                }
            }
            afterReply.append { [unowned self] in daemon.completion.finishInvalidationIfDone(session) }
            return .ok
        case .closeSession(let identifier):
            if let session = daemon.sessions[SessionKey(family: hello.identity.family, identifier: identifier)], session.holder === connection {
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
        daemon.log.error("trust", "refused: \(message)")
        return TransferFailure(code: TransferFailure.requestRefused, message: message, subject: hello.identity.bundleIdentifier.rawValue)
    }

    /// A process says who it is; it is believed only as far as the executable of the process
    /// that wrote the hello goes (the kernel names the writer of every read: not the process
    /// that connected, which may have handed the socket on), and its executable path is the
    /// kernel's, not its own.
    private func welcome(_ claimed: ClientHello, _ connection: ClientConnection) throws -> DaemonReply {
        var hello = claimed
        guard hello.identity.kind != .appExtension || hello.identity.containingApp != hello.identity.bundleIdentifier else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "an extension must name its containing app")
        }
        guard let writer = connection.writer else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "the daemon cannot see who wrote the hello (no credentials)")
        }
        let pid = writer.pid
        // A handle on the writer (the kernel's, taken with its bytes; else one opened before its
        // executable is read): alive after the read, the pid still named the writer.
        func refuse(_ message: String) -> TransferFailure {
            daemon.log.error("trust", "refused: \(message)")
            return TransferFailure(code: TransferFailure.requestRefused, message: message, subject: hello.identity.bundleIdentifier.rawValue)
        }
        var opened: ProcessHandle?
        if writer.process == nil {
            do { opened = try ProcessHandle.open(pid: pid) } catch {
                throw refuse("cannot hold on to process \(pid), which wrote the hello as \(hello.identity.bundleIdentifier), while its executable is checked: \(error)")
            }
        }
        defer { opened?.close() }
        let peer = try daemon.peers.identify(pid: pid)
        guard (writer.process ?? opened)?.isRunning == true else {
            throw refuse("process \(pid), which wrote the hello as \(hello.identity.bundleIdentifier), exited before its executable could be checked")
        }
        guard peer.entitled.contains(hello.identity) else {
            let declared = peer.entitled.isEmpty ? "no entitlements" : peer.entitled.map { "\($0.bundleIdentifier) (groups \($0.appGroups.map(\.rawValue).joined(separator: ", ")))" }.joined(separator: "; ")
            let connected = connection.credentials.map { $0.pid == pid ? "" : " (the connection was opened by process \($0.pid))" } ?? ""
            throw refuse("process \(pid) (\(peer.executablePath)) may not act as \(hello.identity.bundleIdentifier) with app groups [\(hello.identity.appGroups.map(\.rawValue).joined(separator: ", "))]: its executable declares \(declared)\(connected)")
        }
        // What the writer sent before this hello was answered may have been written by another
        // executable (it may have exec'd since): a hello is a round trip.
        guard !connection.hasUnreadInput else {
            throw refuse("process \(pid) (\(peer.executablePath)) sent more before its hello as \(hello.identity.bundleIdentifier) was answered; wait for the welcome")
        }
        hello.executablePath = peer.executablePath
        connection.hello = hello
        if hello.identity.kind != .tool { daemon.registry.register(hello, at: daemon.clock.now) }
        if hello.isForeground && hello.identity.kind == .app {
            // The user launched the app: the rate limiter starts over (S6.5), a force quit ends (S4.2).
            daemon.relauncher.relaunchLimiter[hello.identity.family] = nil
            daemon.relauncher.userLaunched(hello.identity.family)
            if daemon.registry.forceQuit.contains(hello.identity.family) {
                daemon.registry.setForceQuit(hello.identity.family, false)
                daemon.log.notice("relaunch", "\(hello.identity.family) launched by the user: relaunching allowed again")
            }
        }
        daemon.log.info("ipc", "hello from \(hello.processName) (\(hello.identity.bundleIdentifier)) pid \(connection.pid ?? -1)")
        return .welcome(daemonPID: getpid())
    }

    private func open(_ identifier: SessionIdentifier, _ configuration: SessionConfiguration, for hello: ClientHello, _ connection: ClientConnection, launchedForEvents: Bool) throws -> DaemonSession {
        let identity = hello.identity
        if let group = configuration.sharedContainerIdentifier, !identity.appGroups.contains(group) {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "\(identity.bundleIdentifier) is not entitled to app group \(group)", subject: group.rawValue)
        }
        if let group = configuration.cookies?.appGroup, !identity.appGroups.contains(group) {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "\(identity.bundleIdentifier) is not entitled to app group \(group), whose cookie storage the session names", subject: group.rawValue)
        }
        if identity.kind == .appExtension && configuration.sharedContainerIdentifier == nil {
            throw TransferFailure(code: TransferFailure.backgroundSessionRequiresSharedContainer, message: "a background session in an app extension needs a sharedContainerIdentifier", subject: identifier.rawValue)
        }
        let key = SessionKey(family: identity.family, identifier: identifier)
        // A folder left without a usable record is taken up again, never made anew over its journal.
        if daemon.sessions[key] == nil { try daemon.sessionRecovery.takeUpSessionLeftInFolder(key, configuration, for: identity) }
        let session: DaemonSession
        if let existing = daemon.sessions[key] {
            // The owner, or its containing app adopting an extension's session (S1.6).
            guard existing.record.owner == identity.bundleIdentifier || identity.kind == .app else {
                throw TransferFailure(code: TransferFailure.requestRefused, message: "session \(identifier) belongs to \(existing.record.owner)", subject: identifier.rawValue)
            }
            if let holder = existing.holder, holder !== connection, !holder.isClosed {
                // The same process on a new connection (it reconnected): the new one takes over.
                guard holder.pid == nil || holder.pid != connection.pid else {
                    daemon.log.info("sessions", "\(connection.label) reconnected; it takes the session over from its old connection", session: identifier.rawValue)
                    holder.attachedSessions.remove(key)
                    existing.holder = nil
                    return try open(identifier, configuration, for: hello, connection, launchedForEvents: launchedForEvents)
                }
                throw TransferFailure(code: TransferFailure.backgroundSessionInUseByAnotherProcess, message: "background session \(identifier) is already in use by another process (pid \(holder.pid ?? -1))", subject: identifier.rawValue)
            }
            // A reopened session keeps the configuration its tasks started with (S1.8).
            if existing.tasks.isEmpty { try existing.updateConfiguration(configuration) }
            session = existing
        } else {
            try quotas.checkSessions(of: identity.bundleIdentifier, opening: identifier)
            let record = SessionRecord(identifier: identifier, owner: identity.bundleIdentifier, family: identity.family, configuration: configuration, createdAt: daemon.clock.now)
            do {
                session = try DaemonSession(layout: daemon.layout, log: daemon.log, record: record, root: daemon.root)
            } catch let error as Errno {
                // A full disk: the same -3003 as a task that cannot be recorded, with the folder.
                throw JournalReserve.cannotRecord(error, writing: daemon.layout.sessionDirectory(family: key.family, identifier: identifier).path)
            }
            daemon.sessions[key] = session
            daemon.log.notice("sessions", "created session owned by \(identity.bundleIdentifier)", session: identifier.rawValue)
        }
        session.holder = connection
        session.pushedThrough = 0
        session.owesBacklogWord = false // owed once the backlog is sent (`deliverBacklog`)
        session.invalidateWhenDone = false
        connection.attachedSessions.insert(key)
        if launchedForEvents, let launch = daemon.relauncher.launches[key.family], launch.identifier == identifier {
            daemon.relauncher.launchAttached(key)
            daemon.log.info("relaunch", "relaunched app attached (pid \(launch.pid))", session: identifier.rawValue)
        }
        daemon.log.notice("sessions", "\(connection.label) opened the session: \(session.tasks.count) unfinished tasks, \(session.events.count) undelivered events", session: identifier.rawValue,
                          event: LogEvent(.sessionOpened, pid: connection.pid))
        return session
    }

    private func heldSession(_ identifier: SessionIdentifier, _ connection: ClientConnection) throws -> DaemonSession {
        guard let family = connection.hello?.identity.family,
              let session = daemon.sessions[SessionKey(family: family, identifier: identifier)], session.holder === connection else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "session \(identifier) is not open in this process", subject: identifier.rawValue)
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

    /// The user's force quit (S4.2): the app's processes end, every task of its sessions (its
    /// extensions' too) is cancelled with -999 and reason 0, and nothing is relaunched until
    /// the user launches the app.
    private func forceQuit(_ bundle: BundleIdentifier) throws -> DaemonReply {
        let family = daemon.registry.family(of: bundle)
        daemon.registry.setForceQuit(family, true)
        var terminated: [Int32] = []
        for session in daemon.sessions.values where session.key.family == family {
            if let holder = session.holder, let pid = holder.pid {
                kill(pid, SIGKILL)
                terminated.append(pid)
                daemon.clients.disconnect(holder)
            }
        }
        if let launch = daemon.relauncher.launches[family] {
            kill(launch.pid, SIGKILL)
            terminated.append(launch.pid)
        }
        var cancelled = 0
        for session in daemon.sessions.values where session.key.family == family {
            for task in session.unfinishedTasks {
                try daemon.completion.cancel(task.taskIdentifier, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled: the user force-quit the app", backgroundTaskCancelledReason: 0), keepResumeData: true)
                cancelled += 1
            }
        }
        daemon.log.notice("relaunch", "\(family) force-quit by the user: \(cancelled) tasks cancelled, processes \(terminated) ended; no relaunch until the user launches it")
        return .forceQuitDone(cancelledTasks: cancelled, terminatedProcesses: Array(Set(terminated)).sorted())
    }
}
