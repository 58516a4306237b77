internal import Glibc
import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX
import TransferTransport

/// What the challenges need of the rest of the daemon: asking the app, telling it of the
/// task now held, ending a task with its challenge response or as cancelled, and the
/// scheduler's attention. `TransferDaemon` answers (`TransferDaemon+ChallengeSurroundings.swift`).
protocol ChallengeSurroundings: AnyObject {
    /// Puts a question to the session's holder, once per holder (`EventDelivery.askHolder`).
    func askHolder(_ asked: inout [TaskKey: AskedHolder], _ key: TaskKey, in session: DaemonSession,
                   now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> EventDelivery.HolderQuestion
    /// Pushes the session's events to its holder; with nobody attached, housekeeping looks at once
    /// whether to launch the app (for the challenge it must answer).
    func announcePendingEvents(_ session: DaemonSession)
    /// Ends a task the app cancelled (-999).
    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure) throws
    /// Ends a download with the challenge response as its file (S2.5: not an error).
    func completeDownload(_ task: TaskRecord, in session: DaemonSession)
    /// Ends an upload with the challenge response as its data.
    func completeUpload(_ task: TaskRecord, responseBody: Data?, in session: DaemonSession)
    /// An answer may let a task start: the scheduler looks at every task at the end of the turn.
    func requestScheduling()
}

/// Authentication challenges (S3.1 "…or one needs authentication"): a `401` or `407` that
/// offers Basic or Digest holds the task and asks the app — the attached process, or the
/// containing app launched for the session as for events — and the task goes on with the
/// app's answer. Also the apps' refreshed headers before a retry (ours). Owned by the
/// daemon's loop thread.
final class Challenges {
    private unowned let surroundings: any ChallengeSurroundings
    /// Where answers to server-trust challenges go.
    private let serverTrust: ServerTrustChallenges
    /// When to ask for fresh headers before a retry, and how long to wait for them.
    private let retryPolicy: RetryPolicy
    private let layout: ContainerLayout
    private let root: RootDirectory
    private let log: TransferLog
    private let clock: any TimeSource
    var challengesAsked: [TaskKey: AskedHolder] = [:]
    var retryHeadersAsked: [TaskKey: AskedHolder] = [:]
    var retryHeadersAnswered: Set<TaskKey> = []
    /// The credentials apps gave in answer to challenges.
    lazy var credentialStore = CredentialStore(layout: layout, root: root, log: log)

    init(surroundings: any ChallengeSurroundings, serverTrust: ServerTrustChallenges, retryPolicy: RetryPolicy,
         layout: ContainerLayout, root: RootDirectory, log: TransferLog, clock: any TimeSource) {
        self.surroundings = surroundings
        self.serverTrust = serverTrust
        self.retryPolicy = retryPolicy
        self.layout = layout
        self.root = root
        self.log = log
        self.clock = clock
    }

    /// The credentials an exchange of `task` sends: for its server and for the session's proxy.
    func credentials(for task: TaskRecord, in session: DaemonSession) -> TransferCredentials {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        var credentials = TransferCredentials()
        guard credentialStore.holdsAny(for: key) else { return credentials }
        if let server = ProtectionSpaceRecord.endpoint(of: task.requestToSend.url),
           let entry = credentialStore.credential(host: server.host, port: server.port, isProxy: false, task: key) {
            credentials.server = (entry.credential, entry.space)
        }
        if let proxy = session.record.configuration.proxy(for: task.requestToSend.url).flatMap(ProtectionSpaceRecord.endpoint(ofProxy:)),
           let entry = credentialStore.credential(host: proxy.host, port: proxy.port, isProxy: true, task: key) {
            credentials.proxy = (entry.credential, entry.space)
        }
        return credentials
    }

    /// A final response that is a challenge the daemon answers: the task is held with it
    /// (durably) and the app is asked. False when the response is to be delivered as it is.
    func takeChallenge(_ task: TaskRecord, in session: DaemonSession) -> Bool {
        guard let response = task.response, response.statusCode == 401 || response.statusCode == 407 else { return false }
        let isProxy = response.statusCode == 407
        let proxy = session.record.configuration.proxy(for: task.requestToSend.url)
        guard !(isProxy && proxy == nil),
              let header = response.header(isProxy ? "Proxy-Authenticate" : "WWW-Authenticate"),
              let space = ProtectionSpaceRecord(challenge: header, url: task.requestToSend.url, proxy: isProxy ? proxy : nil) else { return false }
        var task = task
        let offered = credentials(for: task, in: session)
        let sent = isProxy ? offered.proxy : offered.server
        if sent != nil { task.authenticationFailures += 1 }
        task.pendingChallenge = ChallengeRecord(protectionSpace: space, previousFailureCount: sent == nil ? 0 : task.authenticationFailures, proposedUser: sent?.credential.user)
        session.update(task)
        log.notice("auth", "\(response.statusCode): \(TaskHold.authentication(task.pendingChallenge!))", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        surroundings.announcePendingEvents(session) // nobody attached: housekeeping launches the app for it
        surroundings.requestScheduling()
        return true
    }

    /// Asks the attached app about a challenged task, once per holder, and waits for the
    /// answer as long as it holds the session (see `scheduleTransfers`).
    func askAboutChallenge(_ task: TaskRecord, in session: DaemonSession) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        _ = surroundings.askHolder(&challengesAsked, key, in: session, now: clock.now, timeout: nil, .challenge(session: session.key.identifier, task))
    }

    /// Whether a session has a task waiting for the app to answer a challenge.
    func hasPendingChallenge(_ session: DaemonSession) -> Bool {
        session.tasks.values.contains { $0.pendingChallenge != nil && $0.state == .running }
    }

    /// The app answered a challenge: go on with its credential (kept as its persistence
    /// says), deliver the response as it is, or cancel.
    func answerChallenge(_ answer: ChallengeAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        guard var task = session.tasks[taskID], let challenge = task.pendingChallenge else { return session.tasks[taskID] }
        let key = TaskKey(session: session.key, task: taskID)
        challengesAsked[key] = nil
        let name = session.key.identifier.rawValue
        if challenge.serverTrust != nil { return try serverTrust.answer(answer, to: challenge, for: task, in: session) }
        let given = answer.disposition == .useCredential ? answer.credential : nil
        // Default handling uses what is stored (given since this attempt started), if not yet refused.
        let space = challenge.protectionSpace
        let stored = given == nil && answer.disposition == .performDefaultHandling && challenge.previousFailureCount == 0
            ? credentialStore.credential(host: space.host, port: space.port, isProxy: space.isProxy, task: key)?.credential : nil
        switch answer.disposition {
        case .cancelAuthenticationChallenge:
            log.notice("auth", "the app cancelled the authentication challenge", session: name, task: taskID)
            try surroundings.cancelTask(taskID, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled: the app cancelled the authentication challenge", subject: task.originalRequest.url))
            return nil
        case .useCredential, .performDefaultHandling, .rejectProtectionSpace:
            task.pendingChallenge = nil
            guard let credential = given ?? stored else {
                // No credential: the response is the answer (Apple delivers the 401 / 407).
                log.notice("auth", "no credential given (\(answer.disposition.rawValue)); delivering the \(task.response?.statusCode ?? 0) response", session: name, task: taskID)
                deliverChallengeResponse(task, in: session)
                return nil
            }
            if let given { credentialStore.remember(given, for: space, task: key) }
            session.update(task)
            log.notice("auth", "the app answered with a credential (\(credential.persistence.rawValue)); trying again", session: name, task: taskID)
            surroundings.requestScheduling()
            return session.tasks[taskID]
        }
    }

    /// Ends a task with the challenge response it got: a download's error page as its file,
    /// an upload's answer as its data (S2.5: not an error).
    private func deliverChallengeResponse(_ task: TaskRecord, in session: DaemonSession) {
        switch task.kind {
        case .download:
            // From the container's root, never through a symlink planted on the way. The page
            // takes its final name once the completion event is on disk (`DaemonSession.complete`).
            let page = session.bodyPath(ofFinished: task)
            if page != session.partialPath(for: task) { try? root.remove(session.partialPath(for: task)) }
            (try? root.open(page, O_WRONLY | O_CREAT))?.close() // an answer without a body: an empty page
            session.update(task)
            surroundings.completeDownload(task, in: session)
        case .upload:
            let body = try? root.read(session.uploadResponsePath(for: task), limit: Int(UploadTransfer.responseBodyLimit))
            session.update(task)
            surroundings.completeUpload(task, responseBody: body, in: session)
        }
    }


    /// Before a retry or resume, an attached app may refresh the request's headers (a fresh
    /// token): it is asked (when the retry policy says so) and the task waits for the answer
    /// (the policy's `freshHeadersWait`). Returns true when the task may start now.
    func headersReadyForRetry(_ task: TaskRecord, in session: DaemonSession, now: Date) -> Bool {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        let policy = retryPolicy
        guard policy.asksForFreshHeaders(before: task), !retryHeadersAnswered.contains(key) else { return true }
        switch surroundings.askHolder(&retryHeadersAsked, key, in: session, now: now, timeout: policy.freshHeadersWait, .retryHeaders(session: session.key.identifier, task)) {
        case .asked, .waiting:
            return false
        case .overdue:
            log.error("auth", "no refreshed headers within \(Int(policy.freshHeadersWait)) s; retrying with the headers it has", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return true
        case .nobodyAttached:
            return true
        }
    }

    /// The app's refreshed headers: set on the request the task sends from now on.
    func answerRetryHeaders(_ fields: [HeaderField]?, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        guard var task = session.tasks[taskID] else { return nil }
        let key = TaskKey(session: session.key, task: taskID)
        retryHeadersAsked[key] = nil
        retryHeadersAnswered.insert(key)
        if let fields, !fields.isEmpty {
            var request = task.requestToSend
            let names = Set(fields.map { $0.name.lowercased() })
            request.headers = request.headers.filter { !names.contains($0.name.lowercased()) } + fields
            task.replacementRequest = request
            session.update(task)
            log.notice("auth", "the app refreshed \(fields.map(\.name).sorted().joined(separator: ", ")) before the retry", session: session.key.identifier.rawValue, task: taskID)
        }
        surroundings.requestScheduling()
        return session.tasks[taskID]
    }

    /// The task ended: its questions, answers and the credentials given for it alone go.
    func forget(_ key: TaskKey) {
        challengesAsked[key] = nil
        retryHeadersAsked[key] = nil
        retryHeadersAnswered.remove(key)
        credentialStore.taskEnded(key)
    }

    /// A task's challenge was settled without asking its holder (another task's answer covered it).
    func answered(_ key: TaskKey) {
        challengesAsked[key] = nil
    }
}
