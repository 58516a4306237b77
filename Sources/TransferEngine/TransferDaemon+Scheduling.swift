import Foundation
import TransferContainer

/// What may transfer when: device conditions, holds, `willBeginDelayedRequest`, priorities
/// and connection limits (S5, S6.5). Runs on the daemon's loop thread.
extension TransferDaemon {
    /// How long an attached app has to answer `willBeginDelayedRequest` before the task
    /// goes on as asked at creation.
    static let delayedRequestAnswerTimeout: TimeInterval = 30

    /// Asks for `startReadyTransfers()` at the end of this turn: a turn that resumes a
    /// thousand tasks or ends six transfers looks at the queue once, not once per change.
    func scheduleTransfers() {
        schedulingRequested = true
    }

    /// Starts every task that may run now, best priority first, then oldest, within the
    /// global limit and each session's per-host limit. Tells attached apps of tasks waiting
    /// for connectivity (S5.2) and asks them about delayed requests (S5.1) on the way.
    func startReadyTransfers() {
        schedulingRequested = false
        let now = Date()
        var candidates: [Candidate] = []
        for session in sessions.values {
            for task in session.tasks.values where task.state == .running {
                let key = TaskKey(session: session.key, task: task.taskIdentifier)
                guard transfersByTask[key] == nil else { continue }
                if let hold = task.hold(under: conditions, now: now) {
                    if hold.isWaitingForConnectivity { reportWaitingForConnectivity(task, in: session) }
                    if case .authentication = hold { askAboutChallenge(task, in: session) }
                    continue
                }
                guard let ready = readyAfterDelayedRequest(task, in: session, now: now),
                      headersReadyForRetry(ready, in: session, now: now) else { continue }
                candidates.append(Candidate(session: session, task: ready.taskIdentifier, priority: ready.priority, createdAt: ready.createdAt, url: ready.requestToSend.url))
            }
        }
        guard !candidates.isEmpty, transfersByHandle.count < options.maximumConcurrentTransfers else { return }
        candidates.sort { a, b in
            a.priority != b.priority ? a.priority > b.priority : a.createdAt < b.createdAt
        }
        var perHost = connectionsPerHost()
        var fetching = coalescedRequestsInFlight()
        for candidate in candidates {
            guard transfersByHandle.count < options.maximumConcurrentTransfers else { return }
            let session = candidate.session
            guard let task = session.tasks[candidate.task] else { continue }
            let host = HostKey(session: session.key, host: host(of: candidate.url))
            guard perHost[host, default: 0] < max(1, session.record.configuration.httpMaximumConnectionsPerHost) else { continue }
            if let request = coalescingKey(task, in: session) {
                // Another task of the session fetches the same bytes: this one takes a copy (S7.4).
                guard fetching.insert(request).inserted else { continue }
            }
            perHost[host, default: 0] += 1
            start(task, in: session)
        }
    }

    /// A task that may start now, with what ordering and the per-host limit need (small, so
    /// that sorting thousands of queued tasks each turn moves little).
    private struct Candidate {
        let session: DaemonSession
        let task: Int
        let priority: Float
        let createdAt: Date
        let url: String
    }

    private func start(_ task: TaskRecord, in session: DaemonSession) {
        retryHeadersAnswered.remove(TaskKey(session: session.key, task: task.taskIdentifier)) // the next retry asks again
        switch task.kind {
        case .download: startDownload(task, in: session)
        case .upload: startUpload(task, in: session, step: task.uploadResumption == nil ? .create : .retrieveOffset)
        }
    }

    /// A session's connections to one host (`httpMaximumConnectionsPerHost` is per session).
    private struct HostKey: Hashable {
        var session: SessionKey
        var host: String
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

    private func connectionsPerHost() -> [HostKey: Int] {
        var counts: [HostKey: Int] = [:]
        for (key, transfer) in transfersByTask {
            counts[HostKey(session: key.session, host: host(of: transfer.task.requestToSend.url)), default: 0] += 1
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
    func rateLimitedStart(for identity: AppIdentity, now: Date = Date()) -> Date? {
        guard identity.kind == .app, let limiter = relaunchLimiter[identity.family],
              !limiter.hasLapsed(at: now) else { return nil }
        return now.addingTimeInterval(limiter.delay)
    }
}
