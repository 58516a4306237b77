import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX
import TransferTransport

/// The scheduler built on its own, with no daemon and no container on disk: its surroundings
/// are a stub that says which transfers are in flight. What `bgtransfer watch` and `inspect`
/// show of a task that may start but does not: every slot taken, and by whom.
@Suite struct SchedulerSlotTests {
    static let limit = 3

    /// The scheduler and the parts it holds, over a container path nothing creates.
    final class Parts {
        let surroundings = Surroundings()
        let multi: CurlMulti
        let scheduler: Scheduler

        init() throws {
            let layout = ContainerLayout(root: FileManager.default.temporaryDirectory.appendingPathComponent("never-made-\(UUID().uuidString)"))
            // Nothing is written: the log's folder does not exist, and errors only would be written.
            let log = TransferLog(layout: layout, process: "test", subsystem: "test", minimumLevel: .error)
            let root = try RootDirectory.open("/")
            let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
            multi = try CurlMulti()
            let serverTrust = ServerTrustChallenges(surroundings: surroundings, layout: layout, root: root, log: log, waker: multi.waker)
            let challenges = Challenges(surroundings: surroundings, serverTrust: serverTrust, retryPolicy: RetryPolicy(), layout: layout, root: root, log: log, clock: clock)
            scheduler = Scheduler(surroundings: surroundings, challenges: challenges, delayedRequests: DelayedRequests(surroundings: surroundings, log: log),
                                  serverTrust: serverTrust, maximumConcurrentTransfers: SchedulerSlotTests.limit, layout: layout, root: root, log: log, clock: clock)
        }
    }

    @Test("Every slot taken: a task that may start is shown waiting for a slot behind the sessions holding them, most first; a slot free: it is not")
    func slotWait() throws {
        let parts = try Parts()
        let a = try SessionKey(family: BundleIdentifier("com.example.a"), identifier: SessionIdentifier("com.example.a.background"))
        let b = try SessionKey(family: BundleIdentifier("com.example.b"), identifier: SessionIdentifier("com.example.b.background"))
        try parts.surroundings.run(TaskKey(session: b, task: 1))
        try parts.surroundings.run(TaskKey(session: a, task: 1))
        #expect(parts.scheduler.slotWait() == nil, "two of three slots taken")

        try parts.surroundings.run(TaskKey(session: a, task: 2))
        #expect(parts.scheduler.slotWait() == .waitingForSlot(behind: [
            SlotHolder(family: "com.example.a", session: "com.example.a.background", transfers: 2),
            SlotHolder(family: "com.example.b", session: "com.example.b.background", transfers: 1),
        ]))

        parts.surroundings.transfersInFlight[TaskKey(session: b, task: 1)] = nil // it ended
        #expect(parts.scheduler.slotWait() == nil, "a slot is free again")
    }

    /// The scheduler's and its gates' surroundings, with no daemon: transfers in flight as the
    /// test sets them, no sessions, and nothing else done.
    final class Surroundings: SchedulerSurroundings, ChallengeSurroundings, ServerTrustSurroundings, DelayedRequestSurroundings {
        var sessions: [SessionKey: DaemonSession] = [:]
        var transfersInFlight: [TaskKey: any Transfer] = [:]

        /// A download of `key` in flight.
        func run(_ key: TaskKey) throws {
            let task = TaskRecord(taskIdentifier: key.task, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/\(key.task)"), createdAt: .distantPast)
            transfersInFlight[key] = try IdleTransfer(session: key.session, task: task)
        }

        func pauseTransfer(_ key: TaskKey) { transfersInFlight[key] = nil }
        func prepareSpareFiles(_ count: Int) {}
        func coalescedRequestsInFlight() -> Set<String> { [] }
        func coalescingKey(_ task: TaskRecord, in session: DaemonSession) -> String? { nil }
        func startDownload(_ task: TaskRecord, in session: DaemonSession) {}
        func startUpload(_ task: TaskRecord, in session: DaemonSession, step: UploadTransfer.Step) {}
        func pushToHolder(_ push: DaemonPush, of session: DaemonSession) {}
        func askHolder(_ asked: inout [TaskKey: AskedHolder], _ key: TaskKey, in session: DaemonSession,
                       now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> EventDelivery.HolderQuestion { .nobodyAttached }
        func announcePendingEvents(_ session: DaemonSession) {}
        func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure) throws {}
        func failTask(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure) {}
        func completeDownload(_ task: TaskRecord, in session: DaemonSession) {}
        func completeUpload(_ task: TaskRecord, responseBody: Data?, in session: DaemonSession) {}
        func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {}
        func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, after cause: RetryCause) {}
        func refusal(of creation: TaskCreation) -> TransferFailure? { nil }
        func requestScheduling() {}
        func requestScheduling(of task: TaskRecord, in session: DaemonSession) {}
        func challengeSettled(_ key: TaskKey) {}
    }

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
