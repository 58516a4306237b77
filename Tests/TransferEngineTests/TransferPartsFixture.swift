import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX
import TransferTransport
@testable import TransferEngine

/// Records what the transfer layer's parts asked of the rest of the daemon: a stub of their
/// small protocols, for tests that build the parts with no `TransferDaemon`. On the test's thread.
final class TransferSurroundingsStub: TaskCompletionSurroundings, RunningTransfersSurroundings, CoalescingSurroundings {
    var sessions: [SessionKey: DaemonSession] = [:]
    var nextResourceDeadline = Date.distantPast
    var deviceConditions = DeviceConditions()
    var trustQuestions: [Int] = []
    /// Tasks handed back to the scheduler (held for a retry: it parks them until their date).
    var scheduled: [TaskRecord] = []
    var pushes: [DaemonPush] = []
    var deliveries: [SessionKey] = []
    var forgotten: [TaskKey] = []

    func serverTrustFailed(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) { trustQuestions.append(task.taskIdentifier) }
    func requestScheduling(of task: TaskRecord, in session: DaemonSession) { scheduled.append(task) }
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession) { pushes.append(push) }
    func announcePendingEvents(_ session: DaemonSession) { deliveries.append(session.key) }
    func forgetRequestsAndChallenges(of key: TaskKey) { forgotten.append(key) }
    // No transfer runs in these tests.
    func transferSlotFreed(by task: TaskRecord) {}
    func downloadEnded(_ transfer: DownloadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {}
    func uploadEnded(_ transfer: UploadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {}
    func queueAgain(_ task: TaskRecord, in session: DaemonSession) {}
    func pushFollowerProgress(of download: DownloadTransfer, in session: DaemonSession) {}
}

/// The transfer layer's parts built from plain values and `TransferSurroundingsStub`, with an
/// event loop on a clock the test moves, and one session (`SessionFixture`). A `DaemonSession`
/// keeps a journal, so the session lives in a temporary container, removed at the end.
final class TransferParts {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    let surroundings = TransferSurroundingsStub()
    let loop: EventLoop
    let completion: TaskCompletion
    let coalescing: Coalescing
    /// The container of the test's own and its one session; removed with the fixture.
    private let container: SessionFixture
    var session: DaemonSession { container.session }
    private let root: RootDirectory

    init(_ configure: (inout SessionConfiguration) -> Void = { _ in }) throws {
        var configuration = SessionConfiguration()
        configure(&configuration)
        container = try SessionFixture("transfer-parts", configuration: configuration)
        let (layout, log) = (container.layout, container.log)
        root = try RootDirectory.open(container.root.path)
        loop = try EventLoop(clock: clock)
        let registry = AppRegistry(layout: layout, root: root, log: log)
        let transfers = RunningTransfers(surroundings: surroundings, layout: layout, loop: loop, clock: clock)
        completion = TaskCompletion(surroundings: surroundings, transfers: transfers, resumeData: ResumeDataStore(layout: layout, root: root, log: log, registry: registry),
                                    lifecycle: TaskLifecycle(), log: log, clock: clock)
        coalescing = Coalescing(surroundings: surroundings, transfers: transfers, completion: completion, root: root, clock: clock)
        surroundings.sessions[session.key] = session
    }

    /// Makes the session's changes durable, as the daemon's commit thread does.
    func commit() throws {
        guard let commit = try session.takeCommit() else { return }
        try commit.perform(log: container.log, root: root)
        session.committed(commit)
    }

    /// A running download task to a port nobody listens on, created now.
    func createDownload(_ request: RequestRecord = RequestRecord(url: "http://127.0.0.1:9/file")) throws -> TaskRecord {
        var task = try session.createTask(TaskCreation(kind: .download, request: request), inBackground: false, pendingFailure: nil, at: clock.now)
        task.state = .running
        session.update(task)
        return task
    }
}
