import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX
import TransferTransport

/// What server trust needs of the rest of the daemon: the sessions a probe's tasks belong to,
/// ending or retrying a task, telling the app, the scheduler's attention, and the challenges'
/// bookkeeping. `TransferDaemon` answers (`TransferDaemon+ServerTrustSurroundings.swift`).
protocol ServerTrustSurroundings: AnyObject {
    /// Where the tasks a finished probe was for are looked up (they may have ended meanwhile).
    var sessions: [SessionKey: DaemonSession] { get }
    /// Ends a task with a failure (its event queued).
    func failTask(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure)
    /// Ends a task the app cancelled (-999).
    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure) throws
    /// A transport failure: the task is tried again later, or fails (`TaskCompletion`).
    func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError)
    /// The task is tried again after `cause`'s backoff, or fails past its bound.
    func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, after cause: RetryCause)
    /// Pushes the session's events to its holder; with nobody attached, housekeeping looks at once
    /// whether to launch the app (for the challenge it must answer).
    func announcePendingEvents(_ session: DaemonSession)
    /// Something changed that may let tasks start: the scheduler looks at every task.
    func requestScheduling()
    /// One task may start: it joins the scheduler's ready queue.
    func requestScheduling(of task: TaskRecord, in session: DaemonSession)
    /// A task's challenge was settled by another task's answer: its holder is not asked about it.
    func challengeSettled(_ key: TaskKey)
}

/// Server trust for background sessions (S3.6): a chain that does not verify against the
/// system store (and the roots installed on the simulated device) holds its task and asks the
/// app with a server-trust challenge, attached or relaunched for it as for a `401`; an app
/// that accepts it with `URLCredential(trust:)` has that server's key, and no other, trusted
/// for its session from then on, across daemon restarts (`session.json`). No request is sent
/// to a server nobody trusts: the chain is learnt by a handshake-only probe (`TrustProbes`:
/// one per server, on a thread of its own, with a deadline). Owned by the daemon's loop thread.
final class ServerTrustChallenges {
    private unowned let surroundings: any ServerTrustSurroundings
    private let log: TransferLog
    /// Wakes the loop when a probe ends (probes run on threads of their own).
    private let waker: CurlMulti.Waker
    /// Root certificates installed on the simulated device (`Daemon/trusted-roots.pem`, and
    /// the file of `transferd --trusted-roots`), trusted besides the system store for every
    /// app, as a profile's CA is on iOS; each file only if its maker may install roots.
    private(set) var deviceRoots: [Data] = []
    /// Where they are read from: the container's file, and the command line's.
    private let rootFiles: [DeviceRootsFile]
    /// The tasks waiting for a probe of their server's chain, by server: one probe per server
    /// at a time, however many tasks (of any session) failed together.
    private var probing: [TrustProbes.Target: Set<TaskKey>] = [:]
    private lazy var probes = TrustProbes(waker: waker)
    /// How many times each task was moved on to another origin by a redirect (`trustFailed`),
    /// for the daemon's life: servers that send a task back and forth are not followed forever
    /// (libcurl's own limit counts within one exchange).
    private var originMoves: [TaskKey: Int] = [:]
    static let maximumOriginMoves = 16

    /// A session's view of one server: what an accepted key covers.
    struct Origin: Hashable {
        var session: SessionKey
        var scheme: String
        var host: String
        var port: Int
    }

    /// - Parameter trustedRootsFile: the file `transferd --trusted-roots` names, read besides
    ///   the container's `Daemon/trusted-roots.pem`.
    init(surroundings: any ServerTrustSurroundings, layout: ContainerLayout, root: RootDirectory, log: TransferLog,
         waker: CurlMulti.Waker, trustedRootsFile: String? = nil) {
        self.surroundings = surroundings
        self.log = log
        self.waker = waker
        rootFiles = [.container(layout, root: root)] + (trustedRootsFile.map { [.option($0)] } ?? [])
    }

    /// Reads the device's installed roots (at start, and when `bgtransfer` says the device changed).
    func loadDeviceRoots() {
        deviceRoots = rootFiles.flatMap(roots(in:))
    }

    /// The roots `file` installs: none when it is not there, or when it is refused (said in the log).
    private func roots(in file: DeviceRootsFile) -> [Data] {
        let bytes: Data?
        do { bytes = try file.read() } catch {
            log.error("trust", "no root certificates installed: \(error)", event: error.event)
            return []
        }
        guard let bytes else {
            // Not there is the usual case for the container's file; one named on the command line is missed.
            if file.isOption { log.notice("trust", "--trusted-roots \(file.path) is not there: no roots from it") }
            return []
        }
        let roots = CertificatePEM.certificates(in: String(decoding: bytes, as: UTF8.self))
        // At notice: a root every app trusts is worth the user's sight.
        log.notice("trust", "\(roots.count) root certificates installed on the device (\(file.path))")
        return roots
    }

    /// How a transfer of `task` judges its server: the system store and the device's roots,
    /// or exactly the key the app accepted for this origin.
    func tlsPolicy(for task: TaskRecord, in session: DaemonSession) -> TLSPolicy {
        // This runs at every transfer's start, and most sessions have accepted no key: the URL
        // is parsed only when one has.
        guard let keys = session.record.acceptedServerKeys, !keys.isEmpty,
              let origin = origin(of: task.requestToSend.url, in: session) else { return TLSPolicy(extraAnchors: deviceRoots) }
        let accepted = keys.last { $0.covers(scheme: origin.scheme, host: origin.host, port: origin.port) }
        return TLSPolicy(extraAnchors: deviceRoots, acceptedPublicKeyPin: accepted?.pin)
    }

    func isProbing(_ key: TaskKey) -> Bool { probing.values.contains { $0.contains(key) } }

    /// A transfer failed because its server's chain was not trusted: the chain is probed
    /// (once for all of the origin's tasks that failed meanwhile), and the app asked about it
    /// (`deliverProbeResults`). The task waits meanwhile.
    func trustFailed(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        // A redirect led to another server: that is the one to judge, and the task goes on
        // from there, under that origin's trust (an accepted key covers its origin only).
        var task = task
        if let url = error.url, origin(of: url, in: session) != origin(of: task.requestToSend.url, in: session) {
            originMoves[key, default: 0] += 1
            guard originMoves[key, default: 0] <= Self.maximumOriginMoves else {
                surroundings.failTask(task, in: session, TransferFailure(code: -1007, message: "too many redirects: moved on to another origin \(Self.maximumOriginMoves) times, now to \(url)", subject: task.originalRequest.url))
                return
            }
            var request = task.requestToSend
            request.url = url
            task.replacementRequest = request
            task.currentURL = url
            session.update(task)
            if error.kind == .redirectFromAcceptedKey {
                log.notice("trust", "redirected to \(url), another origin than the key the app accepted is for; going on from there", session: session.key.identifier.rawValue, task: task.taskIdentifier)
                surroundings.requestScheduling(of: task, in: session)
                return
            }
        }
        guard let origin = origin(of: task.requestToSend.url, in: session) else {
            surroundings.failTask(task, in: session, error.transferFailure(url: task.requestToSend.url))
            return
        }
        log.notice("trust", "\(error); looking at the server's chain", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        let url = task.requestToSend.url
        let target = TrustProbes.Target(scheme: origin.scheme, host: origin.host, port: origin.port, proxy: session.record.configuration.proxy(for: url))
        probing[target, default: []].insert(key)
        // A handshake, not a transfer: no need to wait as long as a request may idle.
        let deadline = min(session.record.configuration.timeoutIntervalForRequest, TrustProbes.longestDeadline)
        probes.probe(TrustProbes.Probe(target: target, url: url, policy: TLSPolicy(extraAnchors: deviceRoots), deadline: deadline))
    }

    /// Called every turn: acts on the probes that finished.
    func deliverProbeResults() {
        for (target, outcome) in probes.takeFinished() {
            for key in probing.removeValue(forKey: target) ?? [] {
                guard let session = surroundings.sessions[key.session], let task = session.tasks[key.task] else { continue }
                act(on: outcome, for: task, in: session)
            }
        }
    }

    /// What a task whose server failed trust does once its chain is known.
    private func act(on outcome: Result<ServerTrustRecord, CurlError>, for task: TaskRecord, in session: DaemonSession) {
        switch outcome {
        case .failure(let error):
            // No handshake at all now (the server went away): an ordinary transport failure.
            surroundings.retryOrFailTask(task, in: session, error)
        case .success(let record) where record.isTrustedByDefault:
            retryAfterDisagreement(task, about: record, in: session)
        case .success(let record):
            ask(about: record, task, in: session)
        }
    }

    /// The transfer's chain failed but the probe's verified (servers behind one name that
    /// differ): tried again with the backoff of network trouble, and -1202 after the bound.
    private func retryAfterDisagreement(_ task: TaskRecord, about record: ServerTrustRecord, in session: DaemonSession) {
        // Counted in the task's record (made durable with the retry), so that a restarted
        // daemon goes on counting: a server that answers each connection differently must not
        // spin the daemon, nor get a fresh bound at every restart.
        let count = min(task.trustDisagreements ?? 0, CheckedNumbers.counters.upperBound - 1) + 1
        var task = task
        task.trustDisagreements = count
        surroundings.retryOrFailTask(task, in: session, after: .trustDisagreement(host: record.host, port: record.port, count: count))
    }

    /// Holds the task with a server-trust challenge, durably, and asks the app (attached, or
    /// launched for it by housekeeping).
    private func ask(about record: ServerTrustRecord, _ task: TaskRecord, in session: DaemonSession) {
        var task = task
        task.pendingChallenge = ChallengeRecord(serverTrust: record)
        task.lastError = record.failureReason
        session.update(task)
        log.notice("trust", "\(record.host):\(record.port) presented a chain that does not verify (\(record.failureReason ?? "code \(record.failureCode ?? 0)")); asking the app", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        surroundings.announcePendingEvents(session) // nobody attached: housekeeping launches the app for it
        surroundings.requestScheduling()
    }

    /// The app's answer to a server-trust challenge: trust exactly the key it accepted, keep the
    /// default evaluation (the task fails with its TLS error and the chain), or cancel (-999).
    func answer(_ answer: ChallengeAnswer, to challenge: ChallengeRecord, for task: TaskRecord, in session: DaemonSession) throws -> TaskRecord? {
        guard let record = challenge.serverTrust else { return task }
        let name = session.key.identifier.rawValue
        var task = task
        task.pendingChallenge = nil
        switch answer.disposition {
        case .cancelAuthenticationChallenge:
            log.notice("trust", "the app cancelled the server-trust challenge", session: name, task: task.taskIdentifier)
            try surroundings.cancelTask(task.taskIdentifier, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled: the app cancelled the server-trust challenge", subject: task.originalRequest.url))
            return nil
        case .useCredential where answer.credential?.serverKeyPin != nil && answer.credential?.serverKeyPin == record.leafPublicKeyPin:
            session.update(task)
            if let pin = record.leafPublicKeyPin, let origin = origin(of: task.requestToSend.url, in: session) {
                do { try session.acceptServerKey(AcceptedServerKey(scheme: origin.scheme, host: origin.host, port: origin.port, pin: pin)) } catch {
                    log.error("store", "cannot keep the accepted key of \(record.host):\(record.port) in the session's record: \(error); trusted until transferd stops", session: name, task: task.taskIdentifier)
                }
                try settleOthers(waitingFor: pin, at: origin, in: session)
            }
            log.notice("trust", "the app trusts the key of \(record.host):\(record.port); trying again, pinned to it", session: name, task: task.taskIdentifier)
            surroundings.requestScheduling()
            return session.tasks[task.taskIdentifier]
        case .useCredential, .performDefaultHandling, .rejectProtectionSpace:
            let why = answer.disposition == .useCredential ? "a credential for another key" : answer.disposition.rawValue
            var failure = TransferFailure(code: record.failureCode ?? TransferFailure.secureConnectionFailed,
                                          message: "The certificate for this server is invalid (\(record.failureReason ?? "not trusted"); the app answered \(why))",
                                          subject: task.originalRequest.url)
            failure.failingURL = task.requestToSend.url
            failure.serverTrust = record
            surroundings.failTask(task, in: session, failure)
            return nil
        }
    }

    /// Other tasks of the session held by a challenge for the same server key go on with the
    /// app's acceptance too: one answer per server, as one connection would have asked once.
    private func settleOthers(waitingFor pin: String, at origin: Origin, in session: DaemonSession) throws {
        for var other in session.tasks.values where other.pendingChallenge?.serverTrust?.leafPublicKeyPin == pin && self.origin(of: other.requestToSend.url, in: session) == origin {
            other.pendingChallenge = nil
            session.update(other)
            surroundings.challengeSettled(TaskKey(session: session.key, task: other.taskIdentifier))
        }
    }

    /// The task ended: a probe of it still under way is dropped when it returns.
    func forget(_ key: TaskKey) {
        for origin in probing.keys { probing[origin]?.remove(key) }
        originMoves[key] = nil
    }

    private func origin(of url: String, in session: DaemonSession) -> Origin? {
        guard let endpoint = ProtectionSpaceRecord.endpoint(of: url) else { return nil }
        return Origin(session: session.key, scheme: endpoint.scheme, host: endpoint.host, port: endpoint.port)
    }
}
