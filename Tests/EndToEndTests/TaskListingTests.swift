import Foundation
import Testing
@testable import BackgroundTransfer
import TransferContainer
import LoopbackServer
import TestPeers
import TransferPOSIX

/// `getAllTasks` against a real daemon: the daemon answers with a summary of each task, and
/// the library asks for the records themselves only of tasks it has not seen as they are.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class TaskListingTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// A daemon that logs at info level, so that its `getTasks:` lines can be counted.
    private func startDaemon() throws -> DaemonUnderTest {
        try DaemonUnderTest.start(container, environment: ["BGTRANSFER_LOG_LEVEL": "info"])
    }

    private func getTasksLines() -> [String] {
        container.logEntries(process: "transferd", category: "tasks").map(\.message).filter { $0.hasPrefix("getTasks:") }
    }

    @Test("getAllTasks shows a record the daemon changed behind the library's back and a task the library never saw, and leaves out a finished one, with one request for the two records")
    func changedBehindTheLibrarysBack() throws {
        _ = try startDaemon()
        server.serve("/listed", data: Data("listed".utf8))
        let delegate = RecordingDelegate()
        let session = fixture.session("listing", delegate: delegate)
        let changed = session.downloadTask(with: server.url(for: "/listed"))
        let untouched = session.downloadTask(with: server.url(for: "/listed"))
        untouched.taskDescription = "untouched"
        let cancelled = session.downloadTask(with: server.url(for: "/listed"))

        // The library's own connection, used behind its session's back: the daemon's replies
        // never reach the task objects (as a reply lost in a reconnection would not).
        let connection = try DaemonConnection.shared()
        let sessionIdentifier = try SessionIdentifier("listing")
        var properties = TaskProperties(of: changed.record)
        properties.taskDescription = "changed in the daemon"
        guard case .task(let changedRecord) = try connection.request(.setTaskProperties(session: sessionIdentifier, task: changed.taskIdentifier, properties)) else {
            Issue.record("setTaskProperties was not answered with the task")
            return
        }
        #expect(changedRecord.revision > changed.record.revision)
        #expect(changed.taskDescription == nil, "the task object has not seen the change")
        guard case .task(let unseen) = try connection.request(.createTask(session: sessionIdentifier, TaskCreation(kind: .download, request: RequestRecord(url: server.url(for: "/listed").absoluteString), taskDescription: "created behind the library's back"))) else {
            Issue.record("createTask was not answered with the task")
            return
        }
        _ = try connection.request(.cancelTask(session: sessionIdentifier, task: cancelled.taskIdentifier, produceResumeData: false))

        let tasks = try #require(allTasks(session))
        #expect(tasks.map(\.taskIdentifier) == [changed.taskIdentifier, untouched.taskIdentifier, unseen.taskIdentifier])
        #expect(tasks.first === changed && tasks.dropFirst().first === untouched, "the task objects the library already had")
        #expect(changed.taskDescription == "changed in the daemon")
        #expect(changed.record.revision == changedRecord.revision)
        #expect(untouched.taskDescription == "untouched")
        let adopted = try #require(tasks.last as? URLSessionDownloadTask)
        #expect(adopted.taskDescription == "created behind the library's back")
        #expect(adopted.originalRequest?.url == server.url(for: "/listed"))
        #expect(tasks.allSatisfy { $0.state == .suspended }, "\(tasks.map(\.state))")
        #expect(getTasksLines() == ["getTasks: the records of 2 of the 2 tasks asked for"], "one request, for the changed task and the unseen one only")

        // Nothing changed since: the summaries are enough.
        #expect(allTasks(session)?.map(\.taskIdentifier) == tasks.map(\.taskIdentifier))
        #expect(getTasksLines().count == 1)

        // The adopted object is the task: it runs and completes through the delegate.
        adopted.resume()
        #expect(delegate.wait { $0 == .completed(task: adopted.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(allTasks(session)?.map(\.taskIdentifier) == [changed.taskIdentifier, untouched.taskIdentifier])
        session.invalidateAndCancel()
    }

    @Test("After a daemon crash and restart, getAllTasks lists the same objects with the daemon's states and counts from the summaries alone: revisions are durable")
    func revisionsSurviveRestart() throws {
        let daemon = try startDaemon()
        var slow = RouteOptions()
        slow.bytesPerSecond = 256 << 10
        server.serve("/partial.bin", data: testPayload(size: 4 << 20), options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("listing-restart", delegate: delegate)
        let queued = session.downloadTask(with: server.url(for: "/partial.bin"))
        let paused = session.downloadTask(with: server.url(for: "/partial.bin"))
        paused.resume()
        #expect(delegate.wait { if case .wroteData(paused.taskIdentifier, _, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        paused.suspend()
        #expect(paused.state == .suspended)
        let received = paused.countOfBytesReceived
        #expect(received > 0)

        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
        _ = try startDaemon()
        #expect(container.waitForLog { $0.isReattached } != nil, "the library reopened its session in the new daemon")

        let tasks = try #require(allTasks(session))
        #expect(tasks.map(\.taskIdentifier) == [queued.taskIdentifier, paused.taskIdentifier])
        #expect(tasks.first === queued && tasks.last === paused)
        #expect(tasks.allSatisfy { $0.state == .suspended }, "\(tasks.map(\.state))")
        #expect(paused.countOfBytesReceived == received)
        #expect(paused.countOfBytesExpectedToReceive == 4 << 20)
        #expect(getTasksLines().isEmpty, "the library's snapshots were of the records' revisions: no records were asked for")
        session.invalidateAndCancel()
    }

    @Test("Eight concurrent `await session.allTasks` while the daemon is stopped (SIGSTOP) hold no thread of the cooperative pool: other async work goes on meanwhile, and all eight answer once the daemon continues (SIGCONT)")
    func asyncListingSuspends() async throws {
        try await onOwnThread { [self] in
            let daemon = try startDaemon()
            server.serve("/listed", data: Data("listed".utf8))
            let session = fixture.session("listing-async", delegate: RecordingDelegate())
            let created = (0..<3).map { _ in session.downloadTask(with: server.url(for: "/listed")).taskIdentifier }
            #expect(allTasks(session)?.map(\.taskIdentifier) == created, "the daemon has the tasks before it stops")

            kill(daemon.pid, SIGSTOP)
            defer { kill(daemon.pid, SIGCONT) }
            let callers = 8
            let started = DispatchSemaphore(value: 0)
            let answered = DispatchSemaphore(value: 0)
            let answers = Locked<[[Int]]>([])
            for _ in 0..<callers {
                Task {
                    started.signal()
                    let tasks = await session.allTasks
                    answers.withLock { $0.append(tasks.map(\.taskIdentifier)) }
                    answered.signal()
                }
            }
            // The pool has two threads here: callers that blocked them would keep the others,
            // and any other async work, from starting. (Generous deadlines: other suites'
            // synchronous tests may hold the pool's threads for a while.)
            let deadline = DispatchTime.now() + 30
            let allStarted = (0..<callers).allSatisfy { _ in started.wait(timeout: deadline) == .success }
            #expect(allStarted, "every caller started while the daemon is stopped")
            let progressed = DispatchSemaphore(value: 0)
            Task {
                await Task.yield()
                progressed.signal()
            }
            #expect(progressed.wait(timeout: .now() + 20) == .success, "other async work runs while the daemon is stopped")
            #expect(answers.withLock { $0 }.isEmpty, "no answer while the daemon is stopped")

            kill(daemon.pid, SIGCONT)
            let answeredDeadline = DispatchTime.now() + 30
            let allAnswered = (0..<callers).allSatisfy { _ in answered.wait(timeout: answeredDeadline) == .success }
            #expect(allAnswered, "every caller answered once the daemon continued")
            #expect(answers.withLock { $0 } == Array(repeating: created, count: callers))
            session.invalidateAndCancel()
        }
    }
}
}
