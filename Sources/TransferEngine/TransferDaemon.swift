internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// The transfer daemon (the stand-in for nsurlsessiond): owns every background task of one
/// container, performs the HTTP work, keeps task state durable, delivers events to the
/// processes that hold sessions, and relaunches the containing app when events wait.
///
/// Everything runs on the thread that calls `run()`, driven by one `EventLoop`.
public final class TransferDaemon {
    /// How the daemon was asked to run.
    public struct Options: Sendable {
        public var layout: ContainerLayout
        /// Exit after this long with nothing to do (started on demand, as launchd would).
        public var exitWhenIdle: TimeInterval?
        /// The resume rate limiter's starting delay between background relaunches of one app (S6.5).
        public var relaunchDelay: TimeInterval = 60
        /// How long an app launched for events may run before it is terminated.
        public var backgroundBudget: TimeInterval = 30
        /// Transfers running at once in the whole daemon (`transferd --max-transfers`).
        public var maximumConcurrentTransfers = 32
        /// Bytes a download leaves free on the container's file system: one that would take
        /// them stops with -3002 and resume data instead of filling the disk.
        public var freeSpaceReserve: Int64 = 64 << 20
        /// A testing aid (`BGTRANSFER_FAULT_CRASH_ON_RESPONSE_HEADER`): a response carrying
        /// this header field makes the daemon trap, as a bug would, so that tests can show
        /// that no input puts the daemon into a crash loop. Nil (always, outside tests): none.
        public var crashOnResponseHeader: String?
        /// Log lines at this level or above also go to stderr.
        public var echoLevel: LogLevel? = .notice

        public init(layout: ContainerLayout) {
            self.layout = layout
        }
    }

    let options: Options
    var layout: ContainerLayout { options.layout }
    let log: TransferLog
    let loop: EventLoop
    let registry: AppRegistry
    /// Who connected processes are, by their executables' entitlements.
    let peers = PeerIdentifier()
    var sessions: [SessionKey: DaemonSession] = [:]
    var connections: [Int32: ClientConnection] = [:]
    private var nextConnectionID = 0
    /// What unidentified peers hold of unfinished requests, all together (see `InputAccount`).
    private let unidentifiedInput = InputAccount()
    /// Where clients' bytes are read into, one connection at a time.
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    private var listener: FileDescriptor?
    private var signals: SignalPipe?
    private var daemonLock: FileLock?

    // Transfers in flight, by libcurl handle and by task.
    var transfersByHandle: [ObjectIdentifier: any Transfer] = [:]
    var transfersByTask: [TaskKey: any Transfer] = [:]
    /// The simulated device conditions, as `bgtransfer conditions` last set them.
    var conditions = DeviceConditions()
    /// Tasks whose holder was asked `willBeginDelayedRequest`, a challenge, or refreshed
    /// headers before a retry (see `askHolder`); and the tasks whose headers were answered.
    var delayedRequestsAsked: [TaskKey: AskedHolder] = [:]
    var challengesAsked: [TaskKey: AskedHolder] = [:]
    var retryHeadersAsked: [TaskKey: AskedHolder] = [:]
    var retryHeadersAnswered: Set<TaskKey> = []
    /// The credentials apps gave in answer to challenges.
    lazy var credentialStore = CredentialStore(layout: layout, log: log)
    /// The containing apps launched for events, by family.
    var launches: [BundleIdentifier: Launch] = [:]
    /// The resume rate limiter per app family, kept in the registry so that inspection sees it.
    var relaunchLimiter: [BundleIdentifier: RelaunchLimiter] {
        get { registry.relaunchLimits }
        set { registry.relaunchLimits = newValue }
    }
    var watchBroadcast = WatchBroadcast()
    private var idleSince: Date?
    private var lastHousekeeping = Date.distantPast
    /// Makes the sessions' changes durable on a thread of its own.
    private lazy var committer = Committer(waker: loop.multi.waker, log: log)
    /// True while the last commit failed: output waits.
    private var commitFailing = false
    /// After a failed commit, the next is not tried before this (a full disk fails at once).
    private var nextCommitTry = Date.distantPast
    /// Set by `scheduleTransfers()`: the queue is looked at once, at the end of the turn.
    var schedulingRequested = false
    /// The tasks that may start, in order (see `startReadyTransfers`).
    var readyQueue = ReadyQueue()
    /// When the scheduler last looked at every task; it does so at least every second, so
    /// that nothing a change forgot to announce waits for ever.
    var lastLookAtEveryTask = Date.distantPast
    /// The earliest a task can outlive its resource timeout (S6.4): until then there is no
    /// need to look at every task for it.
    var nextResourceDeadline = Date.distantPast
    /// When failed attempts are tried again (S6.4), and the time it decides by.
    let retryPolicy = RetryPolicy()
    let clock: any TimeSource = SystemTime()
    /// Empty files made on a thread of their own, given their names as downloads start.
    lazy var spareFiles = SpareFiles(directory: layout.daemonDirectory.path)
    /// The scheduler's memo of each URL's host.
    var hostsByURL: [String: String] = [:]

    public init(options: Options) throws {
        // Started on demand, the daemon serves an existing container only: a client racing
        // the container's removal must not bring it back.
        if options.exitWhenIdle != nil && !FileManager.default.fileExists(atPath: options.layout.root.path) {
            throw DaemonError.noContainer(options.layout.root.path)
        }
        self.options = options
        self.log = TransferLog(layout: options.layout, process: "transferd", subsystem: "com.example.transferd", echoLevel: options.echoLevel)
        try options.layout.prepare()
        self.loop = try EventLoop()
        self.registry = AppRegistry(layout: options.layout, log: log)
        registry.relaunchLimits = [:]  // a restarted daemon starts every app's limiter over
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Runs until a signal or idle exit. Throws `DaemonError.alreadyRunning` when another
    /// daemon serves the container.
    public func run() throws {
        switch try FileLock.tryAcquire(layout.daemonLock.path) {
        case .heldByOther(let pid):
            throw DaemonError.alreadyRunning(container: layout.root.path, pid: pid)
        case .acquired(let lock):
            daemonLock = lock
        }
        let signals = try SignalPipe()
        self.signals = signals
        loop.watch(signals.readEnd, .init(wantsWrite: { false }, onReadable: { [unowned self] in
            if signals.drain() {
                log.notice("daemon", "signal received; stopping (tasks stay durable)")
                loop.stop()
            }
        }, onWritable: {}))

        loadSessions()
        guardAgainstCrashLoops()
        loadConditions()
        let listener = try UnixSocket.listen(at: layout.daemonSocket.path)
        // Every read says which process wrote the bytes, with a pidfd of it (inherited by accepted connections).
        do { try UnixSocket.identifyWriters(listener, handles: true) } catch {
            log.error("trust", "cannot ask the kernel who writes to the socket: \(error); no hello can be verified")
        }
        self.listener = listener
        watchListener()
        loop.onTransferCompleted = { [unowned self] easy, result in transferEnded(easy, result) }
        var multiErrors = 0
        loop.onMultiError = { [unowned self] error in
            multiErrors += 1 // the first, then every thousandth: a failing loop turns four times a second
            if multiErrors % 1000 == 1 { log.error("daemon", "libcurl's multi interface failed (\(multiErrors) times so far): \(error)") }
        }
        loop.onTurn = { [unowned self] in
            CrashGuard.idle()
            housekeeping()
            if schedulingRequested { startReadyTransfers() }
            commitAndFlush()
        }
        log.notice("daemon", "transferd started (pid \(getpid())) on \(layout.root.path); \(sessions.count) sessions, \(sessions.values.reduce(0) { $0 + $1.tasks.count }) unfinished tasks")
        recoverTasks()
        scheduleTransfers()
        loop.run()
        shutdown()
    }

    private func shutdown() {
        spareFiles.stop()
        commitAndWait()
        for transfer in transfersByHandle.values {
            loop.multi.remove(transfer.easy)
            transfer.close()
        }
        for connection in connections.values { connection.close() }
        unlink(layout.daemonSocket.path)
        log.notice("daemon", "transferd stopped")
    }

    // MARK: Sessions on disk

    private func loadSessions() {
        let fm = FileManager.default
        let families = (try? fm.contentsOfDirectory(atPath: layout.sessionsDirectory.path)) ?? []
        for family in families where !family.hasPrefix(".") {
            let familyDirectory = layout.sessionsDirectory.appendingPathComponent(family)
            for identifier in (try? fm.contentsOfDirectory(atPath: familyDirectory.path)) ?? [] where !identifier.hasPrefix(".") {
                let directory = familyDirectory.appendingPathComponent(identifier)
                guard fm.fileExists(atPath: directory.appendingPathComponent("session.json").path) else {
                    // A folder the client made for a session the daemon never created holds no journal either.
                    if let size = (try? fm.attributesOfItem(atPath: JournalContents.path(inSession: directory)))?[.size] as? NSNumber, size.intValue > 0 {
                        log.error("store", "session folder \(directory.path) has a journal but no session.json; skipped, files kept (taken up again when a process of its app opens it)")
                    }
                    continue
                }
                do {
                    let session = try DaemonSession(layout: layout, log: log, loadingFrom: directory)
                    guard session.key.family.rawValue == family, session.key.identifier.rawValue == identifier else {
                        log.error("store", "session record in \(directory.path) names \(session.key); skipped")
                        continue
                    }
                    sessions[session.key] = session
                } catch {
                    log.error("store", "cannot load session in \(directory.path): \(error); skipped, files kept (taken up again when a process of its app opens it)")
                }
            }
        }
    }

    // MARK: Crash loops

    /// Counts a crash of the last daemon against the task it was working on (`CrashGuard`),
    /// durably, before any task is tried again: the task the daemon crashed on
    /// `CrashGuard.crashesBeforeFailing` times fails with an error saying so, so that no
    /// server, record or request can keep the container's daemon down.
    private func guardAgainstCrashLoops() {
        let path = layout.daemonDirectory.appendingPathComponent("crashed-on").path
        let crashed = CrashGuard.takeCrash(at: path)
        do { try CrashGuard.install(path: path) } catch { log.error("daemon", "cannot install the crash guard: \(error)") }
        guard let key = crashed else { return }
        guard let session = sessions[key.session], var task = session.tasks[key.task] else {
            log.error("daemon", "the last transferd crashed while working on task \(key.task) of \(key.session), which has ended since")
            return
        }
        let crashes = min(task.daemonCrashes ?? 0, CheckedNumbers.counters.upperBound - 1) + 1
        task.daemonCrashes = crashes
        if crashes >= CrashGuard.crashesBeforeFailing {
            fail(task, in: session, TransferFailure(code: TransferFailure.unknown,
                                                    message: "transferd crashed \(crashes) times while working on this task; it is not tried again",
                                                    subject: task.requestToSend.url))
        } else {
            try? session.update(task)
            log.error("daemon", "the last transferd crashed while working on this task (crash \(crashes)); trying it once more", session: key.session.identifier.rawValue, task: key.task)
        }
        commitAndWait() // durable before anything is tried again
    }

    // MARK: Clients

    private func acceptClients() {
        while let listener {
            let accepted: FileDescriptor?
            do { accepted = try UnixSocket.accept(listener) } catch {
                // Out of descriptors (EMFILE): stop listening for a moment instead of spinning.
                log.error("ipc", "cannot accept a connection: \(error); pausing for 100 ms (\(connections.count) clients)")
                loop.unwatch(listener)
                loop.schedule(after: 0.1) { [unowned self] in watchListener() }
                return
            }
            guard let fd = accepted else { return }
            nextConnectionID += 1
            let connection = ClientConnection(id: nextConnectionID, descriptor: fd, account: unidentifiedInput)
            if let credentials = connection.credentials, credentials.uid != getuid() {
                log.error("security", "refused connection from uid \(credentials.uid) pid \(credentials.pid): not this user")
                fd.close()
                continue
            }
            connections[fd.rawValue] = connection
            loop.watch(fd, .init(
                wantsWrite: { connection.hasReleasedOutput },
                onReadable: { [unowned self] in read(from: connection) },
                onWritable: { connection.flush() }))
        }
    }

    private func watchListener() {
        guard let listener else { return }
        loop.watch(listener, .init(wantsWrite: { false }, onReadable: { [unowned self] in acceptClients() }, onWritable: {}))
    }

    /// Connections that have not said who they are (with a verified hello) are closed after this long.
    static let helloDeadline: TimeInterval = 10

    private func closeSilentConnections(now: Date) {
        for connection in connections.values where connection.hello == nil && now.timeIntervalSince(connection.acceptedAt) > Self.helloDeadline {
            log.info("ipc", "\(connection.label) did not say who it is within \(Int(Self.helloDeadline)) s; closed")
            disconnect(connection)
        }
    }

    /// Handles what the peer sent, up to its share of this turn (`ClientConnection.framesPerTurn`
    /// and `bytesPerTurn`); the rest waits for the next turn.
    private func read(from connection: ClientConnection) {
        CrashGuard.idle()
        var budget = ClientConnection.bytesPerTurn
        for _ in 0..<ClientConnection.framesPerTurn {
            guard !connection.isClosed else { return }
            switch connection.nextInput(budget: &budget, scratch: readBuffer) {
            case .frame(let body):
                receive(body, from: connection)
            case .idle(let more):
                if more { readAgainNextTurn(connection) }
                return
            case .closed(let reason):
                if let reason { log.error("ipc", "\(connection.label): \(reason); connection closed") }
                disconnect(connection)
                return
            case .foreignWriter(let what):
                log.error("trust", "\(connection.label): \(what); connection closed (a connection speaks for the one process that wrote on it first)")
                disconnect(connection)
                return
            }
        }
        readAgainNextTurn(connection)
    }

    /// Frames may wait in the connection's buffer with nothing new on the socket: look again
    /// next turn instead of waiting for the peer to write more.
    private func readAgainNextTurn(_ connection: ClientConnection) {
        guard !connection.readAgainScheduled else { return }
        connection.readAgainScheduled = true
        loop.schedule(after: 0) { [unowned self, weak connection] in
            guard let connection, !connection.isClosed else { return }
            connection.readAgainScheduled = false
            read(from: connection)
        }
    }

    private func receive(_ body: Data, from connection: ClientConnection) {
        let frame: RequestFrame
        do {
            frame = try Frame.decode(RequestFrame.self, from: body)
        } catch {
            log.error("ipc", "\(connection.label) sent an unreadable request: \(error)")
            answer(connection, .reply(id: 0, .failure(TransferFailure(code: TransferFailure.requestRefused, message: "unreadable request: \(error)"))))
            return
        }
        var afterReply: [() -> Void] = []
        let reply: DaemonReply
        do {
            reply = try handle(frame.request, from: connection, afterReply: &afterReply)
        } catch let failure as TransferFailure {
            log.error("ipc", "\(connection.label): refused: \(failure.message)")
            reply = .failure(failure)
        } catch {
            log.error("ipc", "\(connection.label): request failed: \(error)")
            reply = .failure(TransferFailure(code: TransferFailure.unknown, message: "\(error)"))
        }
        guard answer(connection, .reply(id: frame.id, reply)) else { return }
        afterReply.forEach { $0() }
    }

    /// Queues a reply; a peer too far behind in reading its replies is disconnected (false).
    @discardableResult
    private func answer(_ connection: ClientConnection, _ frame: DaemonFrame) -> Bool {
        guard !connection.send(frame) else { return true }
        if !connection.isClosed {
            log.error("ipc", "\(connection.label) is not reading its replies (\(connection.outboxBytes) bytes wait); disconnecting it")
            disconnect(connection)
        }
        return false
    }

    func disconnect(_ connection: ClientConnection) {
        loop.unwatch(connection.descriptor)
        connections.removeValue(forKey: connection.descriptor.rawValue)
        for key in connection.attachedSessions {
            if let session = sessions[key], session.holder === connection {
                session.holder = nil
                log.info("ipc", "\(connection.label) detached", session: key.identifier.rawValue)
            }
        }
        connection.attachedSessions.removeAll()
        connection.close()
        requestHousekeeping()
    }

    /// Sends a push to the session's holder, if any.
    func push(_ push: DaemonPush, to session: DaemonSession) {
        guard let holder = session.holder else { return }
        if !holder.send(.push(push)) {
            log.error("ipc", "\(holder.label) is not reading; disconnecting it", session: session.key.identifier.rawValue)
            disconnect(holder)
        }
    }

    /// Pushes every event the holder has not been sent yet, in order; without a holder,
    /// lets housekeeping see at once whether the app must be launched.
    func pushPendingEvents(_ session: DaemonSession) {
        guard let holder = session.holder else {
            requestHousekeeping()
            return
        }
        for event in session.events(after: session.pushedThrough) {
            if let encoded = session.takeEncodedEvent(event.number), let frame = try? encoded.pushFrame(session: session.key.identifier) {
                guard holder.send(frame: frame) else {
                    log.error("ipc", "\(holder.label) is not reading; disconnecting it", session: session.key.identifier.rawValue)
                    disconnect(holder)
                    return
                }
            } else {
                push(.event(session: session.key.identifier, event), to: session)
            }
            session.pushedThrough = event.number
        }
    }

    // MARK: Group commit

    /// Starts making this turn's changes durable in every session, unless a commit is under
    /// way (they then wait for the next one), and lets out the replies and pushes whose
    /// changes are on disk. While commits fail (a full or failing disk) nothing new is
    /// sent, so no client hears of a change that is not on disk; they are tried again
    /// every 100 ms.
    private func commitAndFlush() {
        if let outcome = committer.takeOutcome() { commitEnded(outcome) }
        if !committer.isBusy && clock.now >= nextCommitTry {
            var commits: [SessionCommit] = []
            var unencodable = false
            for session in sessions.values where session.needsCommit {
                do {
                    if let commit = try session.takeCommit() { commits.append(commit) }
                } catch {
                    unencodable = true // its changes are not on disk: nothing may be told of them
                    log.error("store", "cannot encode the session's changes: \(error)", session: session.key.identifier.rawValue)
                }
            }
            if commits.isEmpty {
                if !commitFailing && !unencodable { connections.values.forEach { $0.releaseAll() } }
            } else {
                committer.start(commits)
                connections.values.forEach { $0.coverByCommit() }
            }
        } else if committer.isBusy && !sessions.values.contains(where: \.needsCommit) {
            connections.values.forEach { $0.coverByCommit() } // told only of what is being committed
        }
        for connection in connections.values where connection.hasReleasedOutput { connection.flush() }
    }

    private func commitEnded(_ outcome: Committer.Outcome) {
        var failed = false
        for (commit, error) in outcome {
            guard let session = sessions[commit.session] else { continue }
            if let error {
                failed = true
                session.commitFailed(commit)
                if !commitFailing { log.error("store", "cannot commit the session's changes: \(error); replies wait until it succeeds", session: commit.session.identifier.rawValue) }
            } else {
                session.committed(commit)
            }
        }
        if failed {
            nextCommitTry = clock.now.addingTimeInterval(0.1)
            loop.schedule(after: 0.1) {}
        } else {
            if commitFailing { log.notice("store", "changes committed again; replies resume") }
            connections.values.forEach { $0.releaseCovered() }
        }
        commitFailing = failed
    }

    /// Waits for the commit under way and commits what is left: before the daemon exits, and
    /// before it tries anything again after a crash.
    private func commitAndWait() {
        for _ in 0..<2 {
            committer.waitUntilDone()
            nextCommitTry = .distantPast
            commitAndFlush()
        }
        committer.waitUntilDone()
        if let outcome = committer.takeOutcome() { commitEnded(outcome) }
    }

    // MARK: Housekeeping

    /// Asks for housekeeping at the end of this turn (relaunch checks, scheduling) instead
    /// of at the next periodic one: a finished session's app is launched without delay.
    func requestHousekeeping() {
        lastHousekeeping = .distantPast
        loop.schedule(after: 0) {}
    }

    private func housekeeping() {
        let now = clock.now
        guard now.timeIntervalSince(lastHousekeeping) >= 0.05 else { return }
        lastHousekeeping = now
        for pid in ProcessSpawner.reapExitedChildren() { launchEnded(pid: pid) }
        reportProgress(now: now)
        pushTransfersToWatchers(now: now)
        closeSilentConnections(now: now)
        enforceResourceTimeouts(now: now)
        if readyQueue.hasHeldTasks || now.timeIntervalSince(lastLookAtEveryTask) >= 1 { scheduleTransfers() }
        enforceBackgroundBudget(now: now)
        relaunchWhereNeeded(now: now)
        exitIfIdle(now: now)
    }

    private func exitIfIdle(now: Date) {
        guard let limit = options.exitWhenIdle else { return }
        let busy = !connections.isEmpty || !transfersByHandle.isEmpty || !launches.isEmpty
            || sessions.values.contains { session in
                session.tasks.values.contains { $0.state == .running } || (!session.events.isEmpty && wantsRelaunch(session))
            }
        if busy {
            idleSince = nil
        } else if let since = idleSince {
            if now.timeIntervalSince(since) >= limit {
                log.notice("daemon", "idle for \(Int(limit)) s; exiting until a client needs us again")
                loop.stop()
            }
        } else {
            idleSince = now
        }
    }
}

/// A task in the daemon's namespace.
struct TaskKey: Hashable {
    var session: SessionKey
    var task: Int
}

/// A question put to a session's holder about a task: to which connection, and when.
struct AskedHolder {
    var holder: ObjectIdentifier
    var at: Date
}

/// Why the daemon cannot run.
public enum DaemonError: Error, CustomStringConvertible {
    case alreadyRunning(container: String, pid: Int32?)
    case noContainer(String)

    public var description: String {
        switch self {
        case .alreadyRunning(let container, let pid):
            "another transferd\(pid.map { " (pid \($0))" } ?? "") is already serving the container \(container)"
        case .noContainer(let path):
            "the container \(path) does not exist (a daemon started on demand does not create one)"
        }
    }
}
