import Foundation
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX
import TransferTransport

/// The scheduler, the parts that hold its tasks back (server trust, challenges, delayed
/// requests) and the watchers, built as the daemon builds them but with no daemon: what they
/// need of the rest is `SchedulerPartsStub`. Used on the test's thread only.
final class SchedulerParts {
    let surroundings = SchedulerPartsStub()
    let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    /// Server trust's probes wake its loop; the multi must outlive them.
    let multi: CurlMulti
    let serverTrust: ServerTrustChallenges
    let challenges: Challenges
    let delayedRequests: DelayedRequests
    let scheduler: Scheduler
    let watchers: Watchers

    init(layout: ContainerLayout, root: RootDirectory, log: TransferLog, maximumConcurrentTransfers: Int = 32) throws {
        multi = try CurlMulti()
        serverTrust = ServerTrustChallenges(surroundings: surroundings, layout: layout, root: root, log: log, waker: multi.waker)
        challenges = Challenges(surroundings: surroundings, serverTrust: serverTrust, retryPolicy: RetryPolicy(), layout: layout, root: root, log: log, clock: clock)
        delayedRequests = DelayedRequests(surroundings: surroundings, log: log)
        scheduler = Scheduler(surroundings: surroundings, challenges: challenges, delayedRequests: delayedRequests, serverTrust: serverTrust,
                              maximumConcurrentTransfers: maximumConcurrentTransfers, layout: layout, root: root, log: log, clock: clock)
        watchers = Watchers(surroundings: surroundings, scheduler: scheduler, log: log, clock: clock)
    }
}

/// What the scheduler's parts see of a daemon, in a test: the sessions and transfers the test
/// sets, and a record of what they asked for. Nothing is carried out. Test thread only.
final class SchedulerPartsStub: SchedulerSurroundings, ChallengeSurroundings, ServerTrustSurroundings, DelayedRequestSurroundings, WatcherSurroundings {
    var sessions: [SessionKey: DaemonSession] = [:]
    var transfersInFlight: [TaskKey: any Transfer] = [:]
    var watchingConnections: [ClientConnection] = []
    /// What asking a session's holder comes to (`EventDelivery.askHolder`): nobody attached, unless the test says.
    var holderQuestion = EventDelivery.HolderQuestion.nobodyAttached
    /// Why a request the app gives instead is refused; nil: it is not.
    var refusal: TransferFailure?
    /// Sessions whose pending events were announced (the app told, or launched for them).
    private(set) var announced: [SessionKey] = []
    /// Times the scheduler was asked to look at every task.
    private(set) var schedulingRequests = 0
    /// Tasks ended with their response (a challenge delivered as it is).
    private(set) var completed: [Int] = []
    /// Watchers disconnected, by connection id.
    private(set) var disconnected: [Int] = []
    /// Tasks failed, with their codes.
    private(set) var failed: [(task: Int, code: Int)] = []

    /// A download of `key` in flight.
    func run(_ key: TaskKey) throws {
        let task = TaskRecord(taskIdentifier: key.task, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/\(key.task)"), createdAt: .distantPast)
        transfersInFlight[key] = try IdleTransfer(session: key.session, task: task)
    }

    func announcePendingEvents(_ session: DaemonSession) { announced.append(session.key) }
    func requestScheduling() { schedulingRequests += 1 }
    func requestScheduling(of task: TaskRecord, in session: DaemonSession) {}
    func completeDownload(_ task: TaskRecord, in session: DaemonSession) { completed.append(task.taskIdentifier) }
    func completeUpload(_ task: TaskRecord, responseBody: Data?, in session: DaemonSession) { completed.append(task.taskIdentifier) }
    func disconnectWatcher(_ connection: ClientConnection) {
        disconnected.append(connection.id)
        connection.close()
    }
    func askHolder(_ asked: inout [TaskKey: AskedHolder], _ key: TaskKey, in session: DaemonSession,
                   now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> EventDelivery.HolderQuestion {
        // As `EventDelivery.askHolder`: a question put is open until answered.
        if holderQuestion == .asked { asked[key] = AskedHolder(holder: ObjectIdentifier(self), at: now) }
        return holderQuestion
    }
    func pauseTransfer(_ key: TaskKey) { transfersInFlight[key] = nil }
    /// The wakes the scheduler set, in order: a test runs them when their date comes.
    private(set) var wakes: [(date: Date, action: () -> Void)] = []
    func wakeScheduler(at date: Date, _ action: @escaping () -> Void) { wakes.append((date, action)) }
    func prepareSpareFiles(_ count: Int) {}
    func coalescedRequestsInFlight() -> Set<String> { [] }
    func coalescingKey(_ task: TaskRecord, in session: DaemonSession) -> String? { nil }
    func startDownload(_ task: TaskRecord, in session: DaemonSession) {}
    func startUpload(_ task: TaskRecord, in session: DaemonSession, step: UploadTransfer.Step) {}
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession) {}
    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure) throws {}
    func failTask(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure) { failed.append((task.taskIdentifier, failure.code)) }
    func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {}
    func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, after cause: RetryCause) {}
    func refusal(of creation: TaskCreation) -> TransferFailure? { refusal }
    func replaceRequestBody(with body: NewRequestBody, of task: inout TaskRecord, in session: DaemonSession) -> TransferFailure? { nil }
    func challengeSettled(_ key: TaskKey) {}

    /// A transfer in flight that moves nothing: a libcurl handle never added to a multi.
    final class IdleTransfer: Transfer {
        let session: SessionKey
        let task: TaskRecord
        let easy: CurlEasy
        var lastProgressReport = Date.distantPast
        var lastReportedBytes: Int64 = 0
        var bytesMoved: Int64 { 0 }
        var progress: TaskProgress { TaskProgress(taskIdentifier: task.taskIdentifier, state: .running) }

        init(session: SessionKey, task: TaskRecord) throws {
            self.session = session
            self.task = task
            easy = try CurlEasy()
        }

        func close() {}
    }
}
