import Foundation
import Testing
import TransferContainer
import TransferLogging
import TransferPOSIX
import TransferTransport
@testable import TransferEngine

/// Task completion built on its own: no `TransferDaemon`, a stub of what it sees of the rest
/// of the daemon (`TaskCompletionSurroundings`), an event loop on a clock the test moves.
/// The session keeps its journal in a temporary container (a `DaemonSession` needs one).
@Suite struct TaskCompletionAloneTests {
    /// Records what task completion asked of the rest of the daemon.
    final class Surroundings: TaskCompletionSurroundings, RunningTransfersSurroundings {
        var sessions: [SessionKey: DaemonSession] = [:]
        var nextResourceDeadline = Date.distantPast
        var trustQuestions: [Int] = []
        var schedulingLooks = 0
        var pushes: [DaemonPush] = []
        var deliveries: [SessionKey] = []
        var forgotten: [TaskKey] = []

        func serverTrustFailed(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) { trustQuestions.append(task.taskIdentifier) }
        func transfersNeedScheduling() { schedulingLooks += 1 }
        func pushToHolder(_ push: DaemonPush, of session: DaemonSession) { pushes.append(push) }
        func deliverPendingEvents(of session: DaemonSession) { deliveries.append(session.key) }
        func forgetRequestsAndChallenges(of key: TaskKey) { forgotten.append(key) }
        // No transfer runs in these tests.
        func transferSlotFreed(by task: TaskRecord) {}
        func downloadEnded(_ transfer: DownloadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {}
        func uploadEnded(_ transfer: UploadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {}
        func queueAgain(_ task: TaskRecord, in session: DaemonSession) {}
        func pushFollowerProgress(of download: DownloadTransfer, in session: DaemonSession) {}
    }

    /// Task completion, its stub surroundings and one session of the host app, in a container of its own.
    final class Parts {
        static let family = (try? BundleIdentifier("com.example.host"))!
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("completion-alone-\(UUID().uuidString)")
        let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
        let surroundings = Surroundings()
        let loop: EventLoop
        let completion: TaskCompletion
        let session: DaemonSession

        init() throws {
            let layout = ContainerLayout(root: folder)
            try layout.prepare()
            let log = TransferLog(layout: layout, process: "transferd", subsystem: "com.example.transferd", echoLevel: nil, minimumLevel: nil)
            let root = try RootDirectory.open(folder.path)
            loop = try EventLoop(clock: clock)
            let registry = AppRegistry(layout: layout, root: root, log: log)
            let transfers = RunningTransfers(surroundings: surroundings, layout: layout, loop: loop, clock: clock)
            completion = TaskCompletion(surroundings: surroundings, transfers: transfers, resumeData: ResumeDataStore(layout: layout, root: root, log: log, registry: registry),
                                        lifecycle: TaskLifecycle(), loop: loop, log: log, clock: clock)
            let record = SessionRecord(identifier: try SessionIdentifier("com.example.host.background"), owner: Self.family, family: Self.family, configuration: SessionConfiguration(), createdAt: clock.now)
            session = try DaemonSession(layout: layout, log: log, record: record)
            surroundings.sessions[session.key] = session
        }

        deinit { try? FileManager.default.removeItem(at: folder) }

        /// A running download task to a port nobody listens on, created now.
        func createDownload() throws -> TaskRecord {
            var task = try session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/file")), inBackground: false, pendingFailure: nil, at: clock.now)
            task.state = .running
            session.update(task)
            return task
        }
    }

    static func failure(_ kind: CurlError.Kind) -> CurlError { CurlError(kind: kind, origin: .transfer, code: 7, message: "test \(kind)") }

    @Test("Network trouble holds the task for its retry, and the scheduler looks at the queue again when the retry comes due on the loop's clock, not before")
    func retryWakesTheScheduler() throws {
        let parts = try Parts()
        let task = try parts.createDownload()
        parts.completion.retryOrFail(task, in: parts.session, Self.failure(.couldNotConnect))
        let held = try #require(parts.session.tasks[task.taskIdentifier], "the task ended instead of waiting for a retry")
        #expect(held.retryNotBefore == parts.clock.now.addingTimeInterval(0.25))
        parts.clock.advance(by: 0.2)
        parts.loop.turn(maximumWait: 0)
        #expect(parts.surroundings.schedulingLooks == 0, "before the retry is due")
        parts.clock.advance(by: 0.05)
        parts.loop.turn(maximumWait: 0)
        #expect(parts.surroundings.schedulingLooks == 1)
        #expect(parts.surroundings.deliveries.isEmpty && parts.surroundings.forgotten.isEmpty, "nothing ended")
    }

    @Test("A failure that is not retried ends the task: its event carries Apple's code, is handed to delivery, and what the daemon held in memory for the task is dropped")
    func failureEndsAndForgets() throws {
        let parts = try Parts()
        let task = try parts.createDownload()
        parts.completion.retryOrFail(task, in: parts.session, Self.failure(.tooManyRedirects))
        #expect(parts.session.tasks[task.taskIdentifier] == nil)
        let event = try #require(parts.session.events.values.first { $0.task.taskIdentifier == task.taskIdentifier })
        #expect(event.error?.code == -1007)
        #expect(parts.surroundings.deliveries == [parts.session.key])
        #expect(parts.surroundings.forgotten == [TaskKey(session: parts.session.key, task: task.taskIdentifier)])
    }

    @Test("A chain that does not verify goes to the app to judge (S3.6); the task waits for the answer, not ended")
    func trustFailureGoesToTheApp() throws {
        let parts = try Parts()
        let task = try parts.createDownload()
        parts.completion.retryOrFail(task, in: parts.session, Self.failure(.serverTrustFailed(urlErrorCode: -1202)))
        #expect(parts.surroundings.trustQuestions == [task.taskIdentifier])
        #expect(parts.session.tasks[task.taskIdentifier] != nil)
        #expect(parts.session.events.isEmpty)
    }
}
