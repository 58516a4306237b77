import Foundation
import Testing
import TransferContainer
import TransferLogging
import TransferPOSIX
import TransferTransport
@testable import TransferEngine

/// Task completion built on its own (`TransferParts`): no `TransferDaemon`, a stub of what it
/// sees of the rest of the daemon (`TaskCompletionSurroundings`), an event loop on a clock the
/// test moves. The session keeps its journal in a temporary container (a `DaemonSession` needs one).
@Suite struct TaskCompletionAloneTests {
    static func failure(_ kind: CurlError.Kind) -> CurlError { CurlError(kind: kind, origin: .transfer, code: 7, message: "test \(kind)") }

    @Test("Network trouble holds the task for its retry and hands it, held, to the scheduler once (which parks it until its date), with no timer of its own and no look at every task")
    func retryHandsTheHeldTaskToTheScheduler() throws {
        let parts = try TransferParts()
        let task = try parts.createDownload()
        parts.completion.retryOrFail(task, in: parts.session, Self.failure(.couldNotConnect))
        let held = try #require(parts.session.tasks[task.taskIdentifier], "the task ended instead of waiting for a retry")
        #expect(held.retryNotBefore == parts.clock.now.addingTimeInterval(0.25))
        #expect(parts.surroundings.scheduled.map(\.retryNotBefore) == [held.retryNotBefore], "handed over once, held")
        #expect(parts.loop.nextDeadline == nil, "a timer of its own")
        #expect(parts.surroundings.deliveries.isEmpty && parts.surroundings.forgotten.isEmpty, "nothing ended")
    }

    @Test("A failure that is not retried ends the task: its event carries Apple's code, is handed to delivery, and what the daemon held in memory for the task is dropped")
    func failureEndsAndForgets() throws {
        let parts = try TransferParts()
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
        let parts = try TransferParts()
        let task = try parts.createDownload()
        parts.completion.retryOrFail(task, in: parts.session, Self.failure(.serverTrustFailed(urlErrorCode: -1202)))
        #expect(parts.surroundings.trustQuestions == [task.taskIdentifier])
        #expect(parts.session.tasks[task.taskIdentifier] != nil)
        #expect(parts.session.events.isEmpty)
    }
}
