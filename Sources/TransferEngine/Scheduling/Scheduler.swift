import Foundation
import TransferPOSIX
import TransferContainer
import TransferLogging
import TransferTransport

/// What the scheduler needs of the rest of the daemon: the tasks, the transfers in flight,
/// starting and pausing them, and telling an attached app. `TransferDaemon` answers
/// (`TransferDaemon+SchedulerSurroundings.swift`).
protocol SchedulerSurroundings: AnyObject {
    /// Every session, whose running tasks may start.
    var sessions: [SessionKey: DaemonSession] { get }
    /// The transfers in flight, by task: the slots taken, and by whom.
    var transfersInFlight: [TaskKey: any Transfer] { get }
    /// Stops a transfer without ending its task (new conditions forbid it, or its slot goes to
    /// a task below its fair share); what it learnt stays in the task.
    func pauseTransfer(_ key: TaskKey)
    /// Has empty files made ahead for this many downloads about to start.
    func prepareSpareFiles(_ count: Int)
    /// The requests that coalesced tasks fetch now (S7.4): a task asking for the same bytes waits.
    func coalescedRequestsInFlight() -> Set<String>
    /// What a task fetches, when another task of its session may share it (S7.4).
    func coalescingKey(_ task: TaskRecord, in session: DaemonSession) -> String?
    /// Hands a download to libcurl.
    func startDownload(_ task: TaskRecord, in session: DaemonSession)
    /// Hands an upload to libcurl at `step` (a new one, or asking the server how much it has).
    func startUpload(_ task: TaskRecord, in session: DaemonSession, step: UploadTransfer.Step)
    /// Tells the session's holder, if any (`taskIsWaitingForConnectivity`).
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession)
    /// Runs `action` on the loop thread at `date` (the tasks parked until then come due).
    func wakeScheduler(at date: Date, _ action: @escaping () -> Void)
}

/// The scheduler: what may transfer when (S5, S6.5): the ready queue, holds, device
/// conditions, priorities and connection limits. Owned by the daemon's loop thread.
final class Scheduler {
    private unowned let surroundings: any SchedulerSurroundings
    // What may hold a task that could start: a probe of its server's chain, a challenge or
    // fresh headers the app is asked for, a delayed request's question (and the device's roots
    // the conditions come with).
    private let challenges: Challenges
    private let delayedRequests: DelayedRequests
    private let serverTrust: ServerTrustChallenges
    /// Transfers running at once in the whole daemon (`transferd --max-transfers`).
    private let maximumConcurrentTransfers: Int
    private let layout: ContainerLayout
    private let root: RootDirectory
    private let log: TransferLog
    private let clock: any TimeSource
    /// The simulated device conditions, as `bgtransfer conditions` last set them.
    var conditions = DeviceConditions()
    /// Set by `scheduleTransfers()`: the queue is looked at once, at the end of the turn.
    var schedulingRequested = false
    /// The tasks that may start, in order (see `startReadyTransfers`).
    var readyQueue = ReadyQueue()
    /// When the scheduler last looked at every task; it does so at least every second, so
    /// that nothing a change forgot to announce waits for ever.
    var lastLookAtEveryTask = Date.distantPast
    /// How long the last look at every task took, in seconds of the process's own clock.
    private var lastLookDuration: TimeInterval = 0
    /// The earliest a task can outlive its resource timeout (S6.4): until then there is no
    /// need to look at every task for it.
    var nextResourceDeadline = Date.distantPast
    /// The scheduler's memo of each URL's host (its lane) and origin ("host:port").
    var hostsByURL: [String: (host: String, origin: String)] = [:]
    /// Origins whose server answered over HTTP/2: their transfers share multiplexed
    /// connections, so `httpMaximumConnectionsPerHost` counts connections of
    /// `streamsPerConnection` streams. By origin, not host: another port of the same host may
    /// speak HTTP/1.1, one connection a transfer.
    private(set) var multiplexedOrigins: Set<String> = []
    /// Streams the transport runs on one HTTP/2 connection (libcurl's default concurrency).
    static let streamsPerConnection = 100
    /// When each transfer in flight started (by the daemon's clock), for `FairShare`'s
    /// `minimumRun`; entries of transfers that ended are dropped now and then.
    private var startedAt: [TaskKey: Date] = [:]
    /// Tasks whose wait for a slot was logged (once per wait, for the timeline).
    private var loggedSlotWaits: Set<TaskKey> = []
    /// Tasks waiting out a backoff or a begin date: not looked at again until it comes.
    private(set) var datedHolds = DatedHolds()
    /// The date the one wake of `datedHolds` is set for (a wake set for another is stale).
    private var wakeSetFor: Date?

    init(surroundings: any SchedulerSurroundings, challenges: Challenges, delayedRequests: DelayedRequests, serverTrust: ServerTrustChallenges,
         maximumConcurrentTransfers: Int, layout: ContainerLayout, root: RootDirectory, log: TransferLog, clock: any TimeSource) {
        self.surroundings = surroundings
        self.challenges = challenges
        self.delayedRequests = delayedRequests
        self.serverTrust = serverTrust
        self.maximumConcurrentTransfers = maximumConcurrentTransfers
        self.layout = layout
        self.root = root
        self.log = log
        self.clock = clock
    }

    /// Something changed that may let any task start or stop it from starting (a resume, new
    /// conditions, an answer, a date come): the scheduler looks at every task once, at the
    /// end of this turn, however many changes the turn made.
    func scheduleTransfers() {
        readyQueue.isStale = true
        schedulingRequested = true
        nextResourceDeadline = .distantPast
    }

    /// Whether tasks held back (a date not come, a retry's wait, conditions) are due for
    /// another look. Housekeeping asks every 50 ms, as before, while a look at every task
    /// is quick; a look that takes longer is repeated after ten times its length at the
    /// earliest (100,000 held tasks took 40 ms a look: looking every 50 ms kept the loop
    /// busy, and a daemon starting up answered its first client only after a second look).
    func heldTasksDueForLook(now: Date) -> Bool {
        readyQueue.hasHeldTasks && now.timeIntervalSince(lastLookAtEveryTask) >= 10 * lastLookDuration
    }

    /// Looks at every task again at the end of this turn (for the held ones, or as the
    /// once-a-second look) when nothing is known to have changed: the resource deadlines
    /// stand (`scheduleTransfers` forgets them).
    func lookAtEveryTaskAgain() {
        readyQueue.isStale = true
        schedulingRequested = true
    }

    /// One task may have become ready (created, resumed, or its transfer ended and it goes
    /// on): it joins the ready queue without the scheduler looking at every other task.
    /// Also how a finished transfer's slot is offered to the next task.
    func scheduleTransfer(_ task: TaskRecord, in session: DaemonSession) {
        schedulingRequested = true
        // Whatever changed, it is looked at again (and parked again if it waits for a date).
        datedHolds.forget(TaskKey(session: session.key, task: task.taskIdentifier))
        nextResourceDeadline = min(nextResourceDeadline, task.createdAt.addingTimeInterval(session.record.configuration.timeoutIntervalForResource))
        guard !readyQueue.isStale else { return }
        switch readiness(of: task, in: session, now: clock.now) {
        case .ready(let candidate): readyQueue.insert(candidate)
        case .held: readyQueue.hasHeldTasks = true
        case .parked, .notWaiting: break
        }
    }

    /// The task ended: it waits for no date any more.
    func forget(_ key: TaskKey) {
        datedHolds.forget(key)
    }

    /// Sets the wake for the first parked task to come due, unless one is set for it or sooner.
    private func setWake() {
        guard let next = datedHolds.nextDue, wakeSetFor.map({ next < $0 }) ?? true else { return }
        wakeSetFor = next
        surroundings.wakeScheduler(at: next) { [weak self] in self?.wake(setFor: next) }
    }

    /// The tasks parked until now queue, each on its own (no look at every task).
    private func wake(setFor date: Date) {
        guard wakeSetFor == date else { return } // a sooner wake replaced this one and set the next
        wakeSetFor = nil
        for key in datedHolds.takeDue(now: clock.now) {
            guard let session = surroundings.sessions[key.session], let task = session.tasks[key.task] else { continue }
            scheduleTransfer(task, in: session)
        }
        setWake()
    }

    /// Starts tasks from the ready queue within the global limit and each session's
    /// per-host limit, in `FairShare`'s order (apps, then sessions, holding the fewest
    /// slots first; then best priority, then oldest), after taking back the slots of those
    /// above their share while others wait below theirs.
    func startReadyTransfers() {
        schedulingRequested = false
        let now = clock.now
        if readyQueue.isStale { lookAtEveryTask(now: now) }
        let limit = maximumConcurrentTransfers
        var perHost = connectionsPerHost()
        if surroundings.transfersInFlight.count >= limit, readyQueue.count > 0 {
            giveBackSlots(FairShare(limit: limit), perHost: perHost, now: now)
            perHost = connectionsPerHost()
        }
        var counts = FairShare.Counts(running: surroundings.transfersInFlight.keys)
        defer { if surroundings.transfersInFlight.count >= limit { noteSlotWaits(behind: counts.holders()) } }
        guard surroundings.transfersInFlight.count < limit else { return }
        var fetching = surroundings.coalescedRequestsInFlight()
        var pass = readyQueue.beginPass()
        while surroundings.transfersInFlight.count < limit, let candidate = readyQueue.next(in: &pass, hasRoom: { candidate in
            perHost[candidate.lane, default: 0] < transfersAllowed(in: candidate)
        }, rank: { counts.rank(of: $0.session.key) }) {
            // Still ready? Things may have changed since it was queued.
            let session = candidate.session
            var stillReady = false
            if surroundings.sessions[session.key] === session, let queued = session.tasks[candidate.task] {
                switch readiness(of: queued, in: session, now: now) {
                case .ready: stillReady = true
                case .held: readyQueue.hasHeldTasks = true
                case .parked, .notWaiting: break
                }
            }
            // (Readiness may have recorded an answer to the task: take it as it is now.)
            guard stillReady, let task = session.tasks[candidate.task] else {
                readyQueue.take(candidate, in: &pass)
                continue
            }
            if let request = surroundings.coalescingKey(task, in: session), !fetching.insert(request).inserted {
                // Another task of the session fetches the same bytes: this one takes a copy (S7.4).
                readyQueue.skip(candidate, in: &pass)
                continue
            }
            readyQueue.take(candidate, in: &pass)
            perHost[candidate.lane, default: 0] += 1
            counts.add(session.key)
            start(task, in: session)
        }
        surroundings.prepareSpareFiles(min(readyQueue.count, 16)) // for the next ones to start
    }

    /// Fills the ready queue from every task. Tells attached apps of tasks waiting for
    /// connectivity (S5.2) and asks them about delayed requests (S5.1) on the way.
    private func lookAtEveryTask(now: Date) {
        let started = ProcessInfo.processInfo.systemUptime
        defer { lastLookDuration = ProcessInfo.processInfo.systemUptime - started }
        var candidates: [ReadyQueue.Candidate] = []
        var hasHeldTasks = false
        for session in surroundings.sessions.values {
            let tasks = session.tasks // a copy: telling an app of a wait changes the session's
            let look = { (task: TaskRecord) in
                switch self.readiness(of: task, in: session, now: now) {
                case .ready(let candidate): candidates.append(candidate)
                case .held: hasHeldTasks = true
                case .parked, .notWaiting: break
                }
            }
            let parked = datedHolds.parked(in: session.key)
            // Every task waits for its date (one app's tasks to a dead server): its wake queues each.
            if parked.count == tasks.count { continue }
            guard !parked.isEmpty else {
                tasks.forEachRecord(look)
                continue
            }
            // Parked tasks are passed over by number, their records unread (`DatedHolds`).
            for (number, task) in tasks where parked[number].map({ $0 <= now }) ?? true { look(task) }
        }
        readyQueue.replace(with: candidates, hasHeldTasks: hasHeldTasks)
        lastLookAtEveryTask = now
    }

    /// Whether a task may start now.
    private enum Readiness {
        case ready(ReadyQueue.Candidate)
        /// Resumed, but held back for now.
        case held
        /// Resumed, and held back until a date (`datedHolds`), which wakes it.
        case parked
        /// Suspended, or already transferring.
        case notWaiting
    }

    private func readiness(of task: TaskRecord, in session: DaemonSession, now: Date) -> Readiness {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        guard task.state == .running, surroundings.transfersInFlight[key] == nil, !serverTrust.isProbing(key) else { return .notWaiting }
        if let hold = task.hold(under: conditions, now: now) {
            if let due = DatedHolds.date(of: hold) {
                if datedHolds.park(key, until: due) { setWake() }
                return .parked
            }
            if hold.isWaitingForConnectivity { reportWaitingForConnectivity(task, in: session) }
            if case .authentication = hold { challenges.askAboutChallenge(task, in: session) }
            return .held
        }
        guard let ready = delayedRequests.readyAfterDelayedRequest(task, in: session, now: now),
              challenges.headersReadyForRetry(ready, in: session, now: now) else { return .held }
        let lane = ReadyQueue.Lane(session: session.key, host: endpoint(of: ready.requestToSend.url).host)
        return .ready(ReadyQueue.Candidate(session: session, task: ready.taskIdentifier, priority: ready.priority, createdAt: ready.createdAt, lane: lane))
    }

    /// Stops the transfers `policy` takes back from sessions above their share (the slots
    /// are all taken, and tasks wait below theirs); they queue again.
    private func giveBackSlots(_ policy: FairShare, perHost: [ReadyQueue.Lane: Int], now: Date) {
        if startedAt.count > 4 * policy.limit + 64 { startedAt = startedAt.filter { surroundings.transfersInFlight[$0.key] != nil } }
        var waiting: [SessionKey: Int] = [:]
        for (lane, queued) in readyQueue.queuedByLane() {
            let room = transfersAllowed(in: queued.first) - perHost[lane, default: 0]
            if room > 0 { waiting[lane.session, default: 0] += min(room, queued.count) }
        }
        let running = surroundings.transfersInFlight.keys.map { FairShare.Running(task: $0, startedAt: startedAt[$0] ?? .distantPast) }
        for key in policy.transfersToGiveBack(running: running, waiting: waiting, now: now) {
            guard let session = surroundings.sessions[key.session] else { continue }
            surroundings.pauseTransfer(key)
            log.info("transfers", "stopped to give its slot to a task waiting below its fair share; it queues again", session: key.session.identifier.rawValue, task: key.task)
            if let task = session.tasks[key.task] { scheduleTransfer(task, in: session) }
        }
    }

    /// Logs once, for the timeline, each queued task that waits because every slot is
    /// taken, and behind whom. Looks at the heads of the lanes only (the tasks next in line).
    private func noteSlotWaits(behind holders: [SlotHolder]) {
        if loggedSlotWaits.count > 65_536 { loggedSlotWaits.removeAll() }
        for (_, queued) in readyQueue.queuedByLane() {
            let key = TaskKey(session: queued.first.session.key, task: queued.first.task)
            guard loggedSlotWaits.insert(key).inserted else { continue }
            log.info("transfers", "waiting for a transfer slot", session: key.session.identifier.rawValue, task: key.task, hold: .waitingForSlot(behind: holders))
        }
    }

    /// Why a task that may start is not transferring: every slot is taken (nil when one is
    /// free; it then waits only for a connection to its host, or for the next turn).
    func slotWait() -> TaskHold? {
        guard surroundings.transfersInFlight.count >= maximumConcurrentTransfers else { return nil }
        return .waitingForSlot(behind: FairShare.Counts(running: surroundings.transfersInFlight.keys).holders())
    }

    private func start(_ task: TaskRecord, in session: DaemonSession) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        startedAt[key] = clock.now
        loggedSlotWaits.remove(key)
        CrashGuard.working(on: CrashGuard.note(for: key))
        defer { CrashGuard.idle() }
        challenges.retryHeadersAnswered.remove(key) // the next retry asks again
        switch task.kind {
        case .download: surroundings.startDownload(task, in: session)
        case .upload: surroundings.startUpload(task, in: session, step: task.uploadResumption == nil ? .create : .retrieveOffset)
        }
    }

    /// The host a URL names (its lane) and its origin, remembered: parsing each queued task's URL on every turn was a
    /// good part of the daemon's time with thousands of tasks queued.
    private func endpoint(of url: String) -> (host: String, origin: String) {
        if let known = hostsByURL[url] { return known }
        let parsed = ProtectionSpaceRecord.endpoint(of: url)
        let endpoint = (host: parsed?.host ?? "", origin: parsed.map { "\($0.host):\($0.port)" } ?? "")
        if hostsByURL.count >= 65_536 { hostsByURL.removeAll(keepingCapacity: true) }
        hostsByURL[url] = endpoint
        return endpoint
    }

    /// How many transfers a lane may run at once: its session's connections per host, each
    /// one transfer over HTTP/1.1, or `streamsPerConnection` over HTTP/2.
    private func transfersAllowed(in candidate: ReadyQueue.Candidate) -> Int {
        let connections = max(1, candidate.session.record.configuration.httpMaximumConnectionsPerHost)
        guard let url = candidate.session.tasks[candidate.task]?.requestToSend.url,
              multiplexedOrigins.contains(endpoint(of: url).origin) else { return connections }
        return connections * Self.streamsPerConnection
    }

    /// A transfer learnt its server's protocol: an HTTP/2 host takes more transfers at once.
    func learnProtocol(of task: TaskRecord) {
        guard task.networkProtocolName == "h2" else { return }
        let origin = endpoint(of: task.requestToSend.url).origin
        if multiplexedOrigins.count >= 4096 { multiplexedOrigins.removeAll() }
        if multiplexedOrigins.insert(origin).inserted { scheduleTransfers() }
    }

    /// Transfers running in each lane (`httpMaximumConnectionsPerHost` is per session).
    private func connectionsPerHost() -> [ReadyQueue.Lane: Int] {
        var counts: [ReadyQueue.Lane: Int] = [:]
        for (key, transfer) in surroundings.transfersInFlight {
            counts[ReadyQueue.Lane(session: key.session, host: endpoint(of: transfer.task.requestToSend.url).host), default: 0] += 1
        }
        return counts
    }


    func loadConditions() {
        let path = layout.deviceConditions.path
        do {
            // Through the walls and bounded: any program of the user can write the file.
            conditions = try DeviceConditions.decode(root.read(path, limit: StateFileLimits.conditions), path: path)
        } catch let error as Errno where error.code == ENOENT {
            conditions = DeviceConditions()
        } catch {
            log.error("conditions", "\(error); going on with the defaults (\(DeviceConditions()))")
            conditions = DeviceConditions()
        }
        log.info("conditions", "device conditions: \(conditions)")
    }

    /// `bgtransfer conditions` changed them: transfers the new conditions forbid pause (the
    /// bytes they have stay, and they resume from their offset), waiting ones may start.
    func conditionsChanged() {
        serverTrust.loadDeviceRoots()
        let previous = conditions
        loadConditions()
        guard conditions != previous else { return }
        log.notice("conditions", "now \(conditions)")
        for (key, _) in surroundings.transfersInFlight {
            guard let session = surroundings.sessions[key.session], let task = session.tasks[key.task],
                  let hold = task.hold(under: conditions, now: clock.now) else { continue }
            surroundings.pauseTransfer(key)
            log.notice("transfers", "paused: \(hold)", session: key.session.identifier.rawValue, task: key.task, hold: hold)
        }
        scheduleTransfers()
    }

    /// `taskIsWaitingForConnectivity`, once per task, to an attached app (S5.2). A task that
    /// starts waiting while no process holds its session is reported when one attaches.
    private func reportWaitingForConnectivity(_ task: TaskRecord, in session: DaemonSession) {
        guard !task.reportedWaitingForConnectivity, session.holder != nil else { return }
        var task = task
        task.reportedWaitingForConnectivity = true
        session.update(task)
        log.info("transfers", "waiting for connectivity: \(task.requirements.connectivityProblem(under: conditions) ?? "")", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        surroundings.pushToHolder(.waitingForConnectivity(session: session.key.identifier, taskIdentifier: task.taskIdentifier), of: session)
    }
}
