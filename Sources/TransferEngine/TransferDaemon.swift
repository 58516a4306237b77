internal import Glibc
import CPOSIX
import Foundation
import TransferContainer
import TransferTransport
import TransferLogging
import TransferPOSIX

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
        /// How long an app's connection may hold nothing before it is closed
        /// (`transferd --idle-connection-timeout`, `ConnectionShares`).
        public var idleConnectionTimeout: TimeInterval = ConnectionShares.idleTimeout
        /// Unfinished tasks one app (bundle identifier) may have across its sessions
        /// (`transferd --max-tasks-per-app`): past it a new task is refused with -1011.
        public var maximumTasksPerApp = TransferLimits.tasksPerApp
        /// Bytes of task records and undelivered events one app may make the daemon hold
        /// (`transferd --max-bytes-per-app`): past it a new task is refused with -1011.
        public var maximumBytesPerApp = TransferLimits.bytesPerApp
        /// Bytes a download leaves free on the container's file system: one that would take
        /// them stops with -3003 and resume data instead of filling the disk. A new task that
        /// would take them is refused with -3003 (`JournalReserve`): they are kept for the
        /// journal lines that end the tasks already accepted.
        public var freeSpaceReserve: Int64 = 64 << 20
        /// A testing aid (`transferd --fault-crash-on-response-header NAME`, debug builds only):
        /// a response carrying this header field makes the daemon trap, as a bug would, so
        /// that tests can show that no input puts the daemon into a crash loop. Nil: none.
        public var crashOnResponseHeader: String?
        /// A testing aid (`transferd --fault-freeze-on-acknowledgement`, debug builds only): the
        /// daemon stops itself (SIGSTOP) when an acknowledgement arrives, before recording it,
        /// so that a test can cut the power at the instant a client has acknowledged events
        /// that the daemon's journal still holds.
        public var freezeOnAcknowledgement = false
        /// A file of root certificates every app trusts, besides the container's
        /// `Daemon/trusted-roots.pem` (`transferd --trusted-roots`, an absolute path): a
        /// developer's or test's setting, given by whoever starts the daemon; read at start and
        /// when the device's conditions change, only if root or the daemon's user owns it and
        /// no group or other may write it (`DeviceRootsFile`). Nil: none.
        public var trustedRootsFile: String?
        /// The quietest log level written (`--log-level`); nil: the daemon's own
        /// `BGTRANSFER_LOG_LEVEL`, else notice.
        public var logLevel: LogLevel?
        /// What the daemon's rules and the loop's timers read the time from (retries,
        /// deadlines, the rate limiter, the background budget); tests set it.
        package var clock: any TimeSource = SystemTime()
        /// Which failed attempts are tried again, and when (S6.4).
        package var retryPolicy = RetryPolicy()
        /// Log lines at this level or above also go to stderr.
        public var echoLevel: LogLevel? = .notice
        /// The listening socket a service manager passed (`SocketActivation`); nil: the daemon
        /// binds the container's socket itself.
        public var listener: FileDescriptor?
        /// Where readiness and status go (systemd's `NOTIFY_SOCKET`); nil: nowhere.
        public var notifier: ServiceNotifier?

        public init(layout: ContainerLayout) {
            self.layout = layout
        }
    }

    let options: Options
    var layout: ContainerLayout { options.layout }
    let log: TransferLog
    let loop: EventLoop
    let registry: AppRegistry
    /// The container's root, held open: every file the daemon opens inside the container is
    /// opened through it, never through a symlink (`RootDirectory`).
    let root: RootDirectory
    /// Who connected processes are, by their executables' entitlements.
    let peers = PeerIdentifier()
    var sessions: [SessionKey: DaemonSession] = [:]
    private var signals: SignalPipe?
    private var daemonLock: FileLock?
    private var idleSince: Date?
    private var lastHousekeeping = Date.distantPast
    private var lastReachabilityCheck = Date.distantPast
    /// When failed attempts are tried again (S6.4), and the time it decides by.
    var retryPolicy: RetryPolicy { options.retryPolicy }
    var clock: any TimeSource { options.clock }
    /// The task lifecycle's rules (retries, deadlines, endings, relaunches) with the options' figures.
    let lifecycle: TaskLifecycle

    // The parts, each owning its state (see the README's map of the source).
    private(set) lazy var clients = ClientServer(surroundings: self, listener: options.listener, layout: layout, log: log, loop: loop, clock: clock, commits: commits, maximumConcurrentTransfers: options.maximumConcurrentTransfers)
    private(set) lazy var delivery = EventDelivery(surroundings: self, log: log, freezeOnAcknowledgement: options.freezeOnAcknowledgement)
    private(set) lazy var commits = GroupCommit(surroundings: self, loop: loop, log: log, root: root, clock: clock)
    private(set) lazy var scheduler = Scheduler(surroundings: self, challenges: challenges, delayedRequests: delayedRequests, serverTrust: serverTrust, maximumConcurrentTransfers: options.maximumConcurrentTransfers, layout: layout, root: root, log: log, clock: clock)
    private(set) lazy var delayedRequests = DelayedRequests(surroundings: self, log: log)
    private(set) lazy var relauncher = Relauncher(surroundings: self, registry: registry, lifecycle: lifecycle, layout: layout, log: log, clock: clock)
    private(set) lazy var transfers = RunningTransfers(surroundings: self, layout: layout, loop: loop, clock: clock)
    private(set) lazy var completion = TaskCompletion(surroundings: self, transfers: transfers, resumeData: resumeData, lifecycle: lifecycle, log: log, clock: clock)
    private(set) lazy var downloads = Downloads(surroundings: self, transfers: transfers, completion: completion, coalescing: coalescing, root: root, log: log, clock: clock, freeSpaceReserve: options.freeSpaceReserve, crashOnResponseHeader: options.crashOnResponseHeader)
    private(set) lazy var uploads = Uploads(surroundings: self, transfers: transfers, completion: completion, resumeData: resumeData, root: root, log: log, clock: clock, retryPolicy: retryPolicy)
    private(set) lazy var resumeData = ResumeDataStore(layout: layout, root: root, log: log, registry: registry)
    private(set) lazy var coalescing = Coalescing(surroundings: self, transfers: transfers, completion: completion, root: root, clock: clock)
    private(set) lazy var challenges = Challenges(surroundings: self, serverTrust: serverTrust, retryPolicy: retryPolicy, layout: layout, root: root, log: log, clock: clock)
    private(set) lazy var requests = RequestHandler(surroundings: self, layout: layout, log: log, root: root, clock: clock, registry: registry, peers: peers, commits: commits, delivery: delivery, clients: clients, sessionRecovery: sessionRecovery, relauncher: relauncher, resumeData: resumeData, maximumTasksPerApp: options.maximumTasksPerApp, maximumBytesPerApp: options.maximumBytesPerApp, freeSpaceReserve: options.freeSpaceReserve)
    private(set) lazy var listing = TaskListing(transfers: transfers)
    private(set) lazy var watchers = Watchers(surroundings: self, scheduler: scheduler, log: log, clock: clock)
    private(set) lazy var sessionRecovery = SessionRecovery(surroundings: self, layout: layout, log: log, root: root, clock: clock, registry: registry)
    private(set) lazy var serverTrust = ServerTrustChallenges(surroundings: self, layout: layout, root: root, log: log,
                                                              waker: loop.multi.waker,
                                                              trustedRootsFile: options.trustedRootsFile)
    private(set) lazy var service = ServiceReports(notifier: options.notifier, log: log) { [unowned self] in sessions }

    public init(options: Options) throws {
        // Started on demand, the daemon serves an existing container only: a client racing
        // the container's removal must not bring it back.
        if options.exitWhenIdle != nil && !FileManager.default.fileExists(atPath: options.layout.root.path) {
            throw DaemonError.noContainer(options.layout.root.path)
        }
        self.options = options
        self.log = TransferLog(layout: options.layout, process: "transferd", subsystem: "com.example.transferd", echoLevel: options.echoLevel, minimumLevel: options.logLevel)
        try options.layout.prepare()
        self.lifecycle = TaskLifecycle(retryPolicy: options.retryPolicy, relaunchDelay: options.relaunchDelay, backgroundBudget: options.backgroundBudget)
        self.root = try RootDirectory.open(options.layout.root.path)
        self.loop = try EventLoop(clock: options.clock)
        self.registry = AppRegistry(layout: options.layout, root: root, log: log)
        registry.relaunchLimits = [:]  // a restarted daemon starts every app's limiter over
    }

    /// Runs until a signal or idle exit. Throws `DaemonError.alreadyRunning` when another
    /// daemon serves the container.
    public func run() throws {
        raiseDescriptorLimit()
        // A refused 3.5 MB request left the daemon about 4–7 MiB bigger for good: glibc had
        // moved the big buffers to the heap, which keeps its pages (README "Limits").
        _ = cposix_map_large_allocations(256 << 10)
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

        sessionRecovery.loadSessions()
        guardAgainstCrashLoops()
        CacheSweep.removeOrphans(of: sessions, layout: layout, root: root, log: log) // before any transfer makes new files
        scheduler.loadConditions()
        serverTrust.loadDeviceRoots()
        clients.idleTimeout = options.idleConnectionTimeout
        try clients.listen()
        loop.onTransferCompleted = { [unowned self] easy, result in transfers.transferEnded(easy, result) }
        var multiErrors = 0
        loop.onMultiError = { [unowned self] error in
            multiErrors += 1 // the first, then every thousandth: a failing loop turns four times a second
            if multiErrors % 1000 == 1 { log.error("daemon", "libcurl's multi interface failed (\(multiErrors) times so far): \(error)") }
        }
        loop.onTurn = { [unowned self] in
            CrashGuard.idle()
            housekeeping()
            serverTrust.deliverProbeResults()
            if scheduler.schedulingRequested { scheduler.startReadyTransfers() }
            commits.commitAndFlush()
        }
        log.notice("daemon", "transferd started (pid \(getpid())) on \(layout.root.path); \(sessions.count) sessions, \(sessions.values.reduce(0) { $0 + $1.tasks.count }) unfinished tasks; open files limit \(descriptorLimit)")
        scheduler.scheduleTransfers()
        service.ready()
        loop.run()
        service.stopping()
        shutdown()
    }

    /// The descriptors this process may hold (`RLIMIT_NOFILE`), after `raiseDescriptorLimit`.
    private(set) var descriptorLimit = DescriptorLimit(soft: 1024, hard: 1024)

    /// Started on demand, the daemon inherits the client's soft limit (often 1,024): it takes
    /// all the hard limit allows, since it holds descriptors for every app at once.
    private func raiseDescriptorLimit() {
        do {
            descriptorLimit = try DescriptorLimit.raiseSoftToHard()
        } catch {
            log.error("daemon", "cannot raise the limit on open files: \(error)")
            if let current = try? DescriptorLimit.current() { descriptorLimit = current }
        }
    }

    private func shutdown() {
        transfers.spareFiles.stop()
        commits.commitAndWait()
        for transfer in transfers.transfersByHandle.values {
            loop.multi.remove(transfer.easy)
            transfer.close()
        }
        clients.closeAll()
        log.notice("daemon", "transferd stopped")
    }


    // MARK: Crash loops

    /// Counts a crash of the last daemon against the task it was working on (`CrashGuard`),
    /// durably, before any task is tried again: the task the daemon crashed on
    /// `CrashGuard.crashesBeforeFailing` times fails with an error saying so, so that no
    /// server, record or request can keep the container's daemon down.
    private func guardAgainstCrashLoops() {
        let path = layout.daemonDirectory.appendingPathComponent("crashed-on").path
        let runPath = layout.daemonDirectory.appendingPathComponent("transferd.run").path
        let mark = CrashGuard.takeCrash(at: path, lastRun: DaemonRun.recorded(at: runPath, in: root), in: root)
        if let run = DaemonRun.current() {
            do {
                let secret = RunSecret()
                try run.record(at: runPath, sealing: secret, in: root)
                try CrashGuard.install(path: path, run: run, secret: secret, in: root)
            } catch { log.error("daemon", "cannot install the crash guard: \(error)") }
        } else {
            log.error("daemon", "cannot install the crash guard: /proc does not say which process this is")
        }
        guard let mark else { return }
        guard case .crashed(let key) = mark else {
            if case .notCounted(let why) = mark {
                log.error("daemon", "a crash mark in \(path) is not counted: \(why)",
                          event: LogEvent(.crashMarkNotCounted))
            }
            return
        }
        guard let session = sessions[key.session], var task = session.tasks[key.task], task.state == .running else {
            log.error("daemon", "the last transferd crashed while working on task \(key.task) of \(key.session), which is not running now")
            return
        }
        let crashes = min(task.daemonCrashes ?? 0, CheckedNumbers.counters.upperBound - 1) + 1
        task.daemonCrashes = crashes
        if crashes >= CrashGuard.crashesBeforeFailing {
            completion.fail(task, in: session, TransferFailure(code: TransferFailure.unknown,
                                                    message: "transferd crashed \(crashes) times while working on this task; it is not tried again",
                                                    subject: task.requestToSend.url))
        } else {
            session.update(task)
            log.error("daemon", "the last transferd crashed while working on this task (crash \(crashes)); trying it once more", session: key.session.identifier.rawValue, task: key.task)
        }
        commits.commitAndWait() // durable before anything is tried again
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
        for pid in ProcessSpawner.reapExitedChildren() { relauncher.launchEnded(pid: pid) }
        transfers.reportProgress(now: now)
        watchers.pushTransfersToWatchers(now: now)
        clients.closeSilentConnections(now: now)
        let deadlinesKnown = completion.enforceResourceTimeouts(now: now)
        if now.timeIntervalSince(scheduler.lastLookAtEveryTask) >= 1 {
            // Deadlines just worked out from every task stand: forgetting them would make the
            // next turn look at every task for them again (at start-up, before its first answer).
            if deadlinesKnown { scheduler.lookAtEveryTaskAgain() } else { scheduler.scheduleTransfers() }
        } else if scheduler.heldTasksDueForLook(now: now) {
            scheduler.lookAtEveryTaskAgain()
        }
        relauncher.enforceBackgroundBudget(now: now)
        relauncher.relaunchWhereNeeded(now: now)
        service.report()
        exitIfIdle(now: now)
        exitIfUnreachable(now: now)
    }

    /// A daemon whose socket file was removed (its container deleted) or replaced can never
    /// be reached again: it stops, rather than run on unseen with its transfers, once a second.
    private func exitIfUnreachable(now: Date) {
        guard now.timeIntervalSince(lastReachabilityCheck) >= 1 else { return }
        lastReachabilityCheck = now
        guard !clients.isReachable else { return }
        log.error("daemon", "the socket \(layout.daemonSocket.path) was removed or replaced: no client can reach this daemon; stopping")
        loop.stop()
    }

    private func exitIfIdle(now: Date) {
        guard let limit = options.exitWhenIdle else { return }
        let busy = !clients.connections.isEmpty || !transfers.transfersByHandle.isEmpty || !relauncher.launches.isEmpty
            || sessions.values.contains { session in
                session.tasks.values.contains { $0.state == .running } || (!session.events.isEmpty && relauncher.wantsRelaunch(session))
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

/// What the relauncher may see of the daemon (on the loop thread): its sessions, and whether an app is connected.
extension TransferDaemon: RelaunchSurroundings {
    func isAppConnected(_ family: BundleIdentifier) -> Bool {
        clients.connections.values.contains { $0.hello?.identity.bundleIdentifier == family && $0.hello?.identity.kind == .app }
    }
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
