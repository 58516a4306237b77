import Foundation
import TransferContainer

/// What may transfer when: device conditions, holds, `willBeginDelayedRequest`, priorities
/// and connection limits (S5, S6.5). Runs on the daemon's loop thread.
extension TransferDaemon {
    /// How long an attached app has to answer `willBeginDelayedRequest` before the task
    /// goes on as asked at creation.
    static let delayedRequestAnswerTimeout: TimeInterval = 30

    /// Something changed that may let any task start or stop it from starting (a resume, new
    /// conditions, an answer, a date come): the scheduler looks at every task once, at the
    /// end of this turn, however many changes the turn made.
    func scheduleTransfers() {
        readyQueue.isStale = true
        schedulingRequested = true
        nextResourceDeadline = .distantPast
    }

    /// One task may have become ready (created, resumed, or its transfer ended and it goes
    /// on): it joins the ready queue without the scheduler looking at every other task.
    /// Also how a finished transfer's slot is offered to the next task.
    func scheduleTransfer(_ task: TaskRecord, in session: DaemonSession) {
        schedulingRequested = true
        nextResourceDeadline = min(nextResourceDeadline, task.createdAt.addingTimeInterval(session.record.configuration.timeoutIntervalForResource))
        guard !readyQueue.isStale else { return }
        switch readiness(of: task, in: session, now: clock.now) {
        case .ready(let candidate): readyQueue.insert(candidate)
        case .held: readyQueue.hasHeldTasks = true
        case .notWaiting: break
        }
    }

    /// Starts tasks from the ready queue, best priority first, then oldest, within the
    /// global limit and each session's per-host limit.
    func startReadyTransfers() {
        schedulingRequested = false
        let now = clock.now
        if readyQueue.isStale { lookAtEveryTask(now: now) }
        let limit = options.maximumConcurrentTransfers
        guard transfersByHandle.count < limit else { return }
        var perHost = connectionsPerHost()
        var fetching = coalescedRequestsInFlight()
        var pass = readyQueue.beginPass()
        while transfersByHandle.count < limit, let candidate = readyQueue.next(in: &pass, hasRoom: { candidate in
            perHost[candidate.lane, default: 0] < max(1, candidate.session.record.configuration.httpMaximumConnectionsPerHost)
        }) {
            // Still ready? Things may have changed since it was queued.
            let session = candidate.session
            var stillReady = false
            if sessions[session.key] === session, let queued = session.tasks[candidate.task] {
                switch readiness(of: queued, in: session, now: now) {
                case .ready: stillReady = true
                case .held: readyQueue.hasHeldTasks = true
                case .notWaiting: break
                }
            }
            // (Readiness may have recorded an answer to the task: take it as it is now.)
            guard stillReady, let task = session.tasks[candidate.task] else {
                readyQueue.take(candidate, in: &pass)
                continue
            }
            if let request = coalescingKey(task, in: session), !fetching.insert(request).inserted {
                // Another task of the session fetches the same bytes: this one takes a copy (S7.4).
                readyQueue.skip(candidate, in: &pass)
                continue
            }
            readyQueue.take(candidate, in: &pass)
            perHost[candidate.lane, default: 0] += 1
            start(task, in: session)
        }
        spareFiles.want(min(readyQueue.count, 16)) // for the next ones to start
    }

    /// Fills the ready queue from every task. Tells attached apps of tasks waiting for
    /// connectivity (S5.2) and asks them about delayed requests (S5.1) on the way.
    private func lookAtEveryTask(now: Date) {
        var candidates: [ReadyQueue.Candidate] = []
        var hasHeldTasks = false
        for session in sessions.values {
            for task in session.tasks.values {
                switch readiness(of: task, in: session, now: now) {
                case .ready(let candidate): candidates.append(candidate)
                case .held: hasHeldTasks = true
                case .notWaiting: break
                }
            }
        }
        readyQueue.replace(with: candidates, hasHeldTasks: hasHeldTasks)
        lastLookAtEveryTask = now
    }

    /// Whether a task may start now.
    private enum Readiness {
        case ready(ReadyQueue.Candidate)
        /// Resumed, but held back for now.
        case held
        /// Suspended, or already transferring.
        case notWaiting
    }

    private func readiness(of task: TaskRecord, in session: DaemonSession, now: Date) -> Readiness {
        guard task.state == .running, transfersByTask[TaskKey(session: session.key, task: task.taskIdentifier)] == nil else { return .notWaiting }
        if let hold = task.hold(under: conditions, now: now) {
            if hold.isWaitingForConnectivity { reportWaitingForConnectivity(task, in: session) }
            if case .authentication = hold { askAboutChallenge(task, in: session) }
            return .held
        }
        guard let ready = readyAfterDelayedRequest(task, in: session, now: now),
              headersReadyForRetry(ready, in: session, now: now) else { return .held }
        let lane = ReadyQueue.Lane(session: session.key, host: host(of: ready.requestToSend.url))
        return .ready(ReadyQueue.Candidate(session: session, task: ready.taskIdentifier, priority: ready.priority, createdAt: ready.createdAt, lane: lane))
    }

    private func start(_ task: TaskRecord, in session: DaemonSession) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        CrashGuard.working(on: CrashGuard.note(for: key))
        defer { CrashGuard.idle() }
        retryHeadersAnswered.remove(key) // the next retry asks again
        switch task.kind {
        case .download: startDownload(task, in: session)
        case .upload: startUpload(task, in: session, step: task.uploadResumption == nil ? .create : .retrieveOffset)
        }
    }

    /// The host a URL names, remembered: parsing each queued task's URL on every turn was a
    /// good part of the daemon's time with thousands of tasks queued.
    private func host(of url: String) -> String {
        if let known = hostsByURL[url] { return known }
        let host = URLComponents(string: url)?.host?.lowercased() ?? ""
        if hostsByURL.count >= 65_536 { hostsByURL.removeAll(keepingCapacity: true) }
        hostsByURL[url] = host
        return host
    }

    /// Transfers running in each lane (`httpMaximumConnectionsPerHost` is per session).
    private func connectionsPerHost() -> [ReadyQueue.Lane: Int] {
        var counts: [ReadyQueue.Lane: Int] = [:]
        for (key, transfer) in transfersByTask {
            counts[ReadyQueue.Lane(session: key.session, host: host(of: transfer.task.requestToSend.url)), default: 0] += 1
        }
        return counts
    }

    // MARK: Device conditions

    func loadConditions() {
        do {
            conditions = try DeviceConditions.load(from: layout)
        } catch {
            log.error("conditions", "\(error); going on with the defaults (\(DeviceConditions()))")
            conditions = DeviceConditions()
        }
        log.info("conditions", "device conditions: \(conditions)")
    }

    /// `bgtransfer conditions` changed them: transfers the new conditions forbid pause (the
    /// bytes they have stay, and they resume from their offset), waiting ones may start.
    func conditionsChanged() {
        let previous = conditions
        loadConditions()
        guard conditions != previous else { return }
        log.notice("conditions", "now \(conditions)")
        for (key, _) in transfersByTask {
            guard let session = sessions[key.session], let task = session.tasks[key.task],
                  let hold = task.hold(under: conditions) else { continue }
            stopTransfer(key)
            log.notice("transfers", "paused: \(hold)", session: key.session.identifier.rawValue, task: key.task)
        }
        scheduleTransfers()
    }

    /// `taskIsWaitingForConnectivity`, once per task, to an attached app (S5.2). A task that
    /// starts waiting while no process holds its session is reported when one attaches.
    private func reportWaitingForConnectivity(_ task: TaskRecord, in session: DaemonSession) {
        guard !task.reportedWaitingForConnectivity, session.holder != nil else { return }
        var task = task
        task.reportedWaitingForConnectivity = true
        do { try session.update(task) } catch {
            log.error("store", "cannot record the connectivity report: \(error)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return
        }
        log.info("transfers", "waiting for connectivity: \(task.requirements.connectivityProblem(under: conditions) ?? "")", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        push(.waitingForConnectivity(session: session.key.identifier, taskIdentifier: task.taskIdentifier), to: session)
    }

    // MARK: Delayed requests (S5.1)

    /// A task with an `earliestBeginDate` whose date has come: the attached app is asked
    /// `willBeginDelayedRequest` first (nil while it decides); with nobody attached, or no
    /// answer in time, it goes on as created. Returns the task as it may start.
    private func readyAfterDelayedRequest(_ task: TaskRecord, in session: DaemonSession, now: Date) -> TaskRecord? {
        guard task.earliestBeginDate != nil, !task.delayedRequestAnswered else { return task }
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        switch askHolder(\.delayedRequestsAsked, key, in: session, now: now, timeout: Self.delayedRequestAnswerTimeout, .delayedRequest(session: session.key.identifier, task)) {
        case .asked:
            log.info("transfers", "earliestBeginDate reached; asking willBeginDelayedRequest", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return nil
        case .waiting:
            return nil
        case .overdue:
            log.error("transfers", "no answer to willBeginDelayedRequest within \(Int(Self.delayedRequestAnswerTimeout)) s; continuing", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        case .nobodyAttached:
            break
        }
        var ready = task
        ready.delayedRequestAnswered = true
        try? session.update(ready)
        return ready
    }

    /// The app's answer to `willBeginDelayedRequest`: go on, go on with another request, or cancel.
    func answerDelayedRequest(_ answer: DelayedRequestAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        guard var task = session.tasks[taskID] else { return nil } // ended meanwhile
        let key = TaskKey(session: session.key, task: taskID)
        delayedRequestsAsked[key] = nil
        task.delayedRequestAnswered = true
        switch answer {
        case .continueLoading:
            try session.update(task)
            log.info("transfers", "willBeginDelayedRequest: continue loading", session: session.key.identifier.rawValue, task: taskID)
        case .useNewRequest(let request):
            if let refusal = refusal(of: TaskCreation(kind: task.kind, request: request)) {
                fail(task, in: session, refusal)
                return nil
            }
            task.replacementRequest = request
            try session.update(task)
            log.notice("transfers", "willBeginDelayedRequest: using a new request for \(request.url)", session: session.key.identifier.rawValue, task: taskID)
        case .cancel:
            try cancel(taskID, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled in willBeginDelayedRequest"))
            return nil
        }
        scheduleTransfers()
        return session.tasks[taskID]
    }

    // MARK: Questions to the holder

    /// Where a question the daemon put to a session's holder about a task stands.
    enum HolderQuestion {
        /// Put just now, to the current holder.
        case asked
        /// Put earlier to the current holder, which may still answer.
        case waiting
        /// Put to the current holder longer than the timeout ago: go on without the answer.
        case overdue
        /// Nobody holds the session: go on without asking.
        case nobodyAttached
    }

    /// Puts `question` to the session's holder about a task, once per holder (a process that
    /// takes the session over is asked again); `asked` records to whom and when. A nil
    /// `timeout` waits for the answer as long as the holder stays.
    func askHolder(_ asked: ReferenceWritableKeyPath<TransferDaemon, [TaskKey: AskedHolder]>, _ key: TaskKey, in session: DaemonSession,
                   now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> HolderQuestion {
        guard let holder = session.holder else {
            self[keyPath: asked][key] = nil
            return .nobodyAttached
        }
        if let previous = self[keyPath: asked][key], previous.holder == ObjectIdentifier(holder) {
            guard let timeout, now.timeIntervalSince(previous.at) >= timeout else { return .waiting }
            self[keyPath: asked][key] = nil
            return .overdue
        }
        self[keyPath: asked][key] = AskedHolder(holder: ObjectIdentifier(holder), at: now)
        push(question(), to: session)
        return .asked
    }

    /// A task ended: what the daemon kept in memory for it goes.
    func forgetTask(_ key: TaskKey) {
        delayedRequestsAsked[key] = nil
        challengesAsked[key] = nil
        retryHeadersAsked[key] = nil
        retryHeadersAnswered.remove(key)
        credentialStore.taskEnded(key)
    }

    // MARK: The resume rate limiter (S6.5)

    /// When a task the app creates now, in the background, may start: after the app's
    /// current relaunch delay, while its rate limiter runs; nil when it does not.
    func rateLimitedStart(for identity: AppIdentity) -> Date? {
        let now = clock.now
        guard identity.kind == .app, let limiter = relaunchLimiter[identity.family],
              !limiter.hasLapsed(at: now) else { return nil }
        return now.addingTimeInterval(limiter.delay)
    }
}
