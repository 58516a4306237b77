import Foundation
import Testing
import TransferContainer
import TransferTransport
@testable import TransferEngine

/// How a task ends or goes on after a failed attempt (S6.4), with a set clock: the retry
/// policy as the daemon applies it, and the resource deadline. No waiting.
@Suite struct TaskCompletionTests {
    static func failure(_ kind: CurlError.Kind) -> CurlError { CurlError(kind: kind, origin: .transfer, code: 7, message: "test \(kind)") }

    /// The completion event of task `identifier`, if it has ended.
    private func ending(_ identifier: Int, in fixture: DaemonFixture) -> EventRecord? {
        fixture.session.events.values.first { $0.task.taskIdentifier == identifier }
    }

    @Test("Network trouble is tried again after a backoff that doubles with each retry")
    func backoffGrows() throws {
        let fixture = try DaemonFixture()
        let task = try fixture.createDownload()
        var waits: [TimeInterval] = []
        for _ in 0..<4 {
            let current = try #require(fixture.session.tasks[task.taskIdentifier])
            fixture.daemon.completion.retryOrFail(current, in: fixture.session, Self.failure(.couldNotConnect))
            let retry = try #require(fixture.session.tasks[task.taskIdentifier]?.retryNotBefore)
            waits.append(retry.timeIntervalSince(fixture.clock.now))
        }
        #expect(waits == [0.25, 0.5, 1, 2])
        #expect(fixture.session.tasks[task.taskIdentifier]?.retryCount == 4)
        #expect(ending(task.taskIdentifier, in: fixture) == nil)
    }

    @Test("A redirect under an accepted key moves the task on to the target's origin (currentRequest); sent back and forth more than 16 times, it ends with -1007")
    func redirectsBetweenOrigins() throws {
        let fixture = try DaemonFixture()
        let task = try fixture.createDownload(url: "https://127.0.0.1:1/file")
        for move in 1...17 {
            var error = Self.failure(.redirectFromAcceptedKey)
            error.url = move % 2 == 1 ? "https://127.0.0.1:2/file" : "https://127.0.0.1:1/file"
            let current = try #require(fixture.session.tasks[task.taskIdentifier], "ended after \(move - 1) moves")
            fixture.daemon.completion.retryOrFail(current, in: fixture.session, error)
            if move <= 16 {
                #expect(fixture.session.tasks[task.taskIdentifier]?.requestToSend.url == error.url)
                #expect(fixture.session.tasks[task.taskIdentifier]?.currentURL == error.url)
            }
        }
        #expect(fixture.session.tasks[task.taskIdentifier] == nil)
        #expect(ending(task.taskIdentifier, in: fixture)?.error?.code == -1007)
    }

    @Test("An origin is scheme, host and port: a redirect under an accepted key from https to http on the same host and port moves the task on too")
    func redirectToAnotherScheme() throws {
        let fixture = try DaemonFixture()
        let task = try fixture.createDownload(url: "https://127.0.0.1:1/file")
        var error = Self.failure(.redirectFromAcceptedKey)
        error.url = "http://127.0.0.1:1/file"
        fixture.daemon.completion.retryOrFail(task, in: fixture.session, error)
        #expect(fixture.session.tasks[task.taskIdentifier]?.requestToSend.url == "http://127.0.0.1:1/file")
        #expect(!fixture.daemon.serverTrust.isProbing(fixture.key(task)), "nothing to ask about the first server")
    }

    @Test("A failure that is not network trouble ends the task at once with Apple's code, and its event is in the session")
    func nonRetryableFailsAtOnce() throws {
        let fixture = try DaemonFixture()
        let task = try fixture.createDownload()
        fixture.daemon.completion.retryOrFail(task, in: fixture.session, Self.failure(.tooManyRedirects))
        #expect(fixture.session.tasks[task.taskIdentifier] == nil)
        let event = try #require(ending(task.taskIdentifier, in: fixture))
        #expect(event.error?.code == -1007)
        #expect(event.createdAt == fixture.clock.now, "events are stamped by the daemon's clock")
    }

    @Test("Retries stop at the resource deadline: the next failure after it ends the task with -1001")
    func retriesStopAtTheDeadline() throws {
        let fixture = try DaemonFixture { _, configuration in configuration.timeoutIntervalForResource = 60 }
        let task = try fixture.createDownload()
        fixture.clock.advance(by: 59)
        fixture.daemon.completion.retryOrFail(task, in: fixture.session, Self.failure(.connectionLost))
        #expect(fixture.session.tasks[task.taskIdentifier] != nil, "retried within the deadline")
        fixture.clock.advance(by: 1)
        let current = try #require(fixture.session.tasks[task.taskIdentifier])
        fixture.daemon.completion.retryOrFail(current, in: fixture.session, Self.failure(.connectionLost))
        #expect(ending(task.taskIdentifier, in: fixture)?.error?.code == TransferFailure.timedOut)
    }

    @Test("A running task outliving timeoutIntervalForResource ends with -1001 when the clock passes it, not before; a suspended one waits")
    func resourceDeadline() throws {
        let fixture = try DaemonFixture { _, configuration in configuration.timeoutIntervalForResource = 60 }
        let running = try fixture.createDownload()
        var suspended = try fixture.createDownload()
        suspended.state = .suspended
        try fixture.session.update(suspended)
        let completion = fixture.daemon.completion
        fixture.daemon.scheduler.scheduleTransfers() // the deadline is looked at again
        completion.enforceResourceTimeouts(now: fixture.clock.now.addingTimeInterval(60))
        #expect(fixture.session.tasks.count == 2, "at the deadline, not past it")
        fixture.clock.advance(by: 60.5)
        completion.enforceResourceTimeouts(now: fixture.clock.now)
        #expect(ending(running.taskIdentifier, in: fixture)?.error?.code == TransferFailure.timedOut)
        #expect(fixture.session.tasks[suspended.taskIdentifier] != nil)
    }

    @Test("A Retry-After that ends past the resource deadline ends the task now with -1001; one within it waits exactly as asked")
    func retryAfter() throws {
        let fixture = try DaemonFixture { _, configuration in configuration.timeoutIntervalForResource = 600 }
        let waiting = try fixture.createDownload()
        fixture.daemon.completion.retryOrFail(waiting, in: fixture.session, after: .serverAskedToWait(status: 503, seconds: 120))
        #expect(fixture.session.tasks[waiting.taskIdentifier]?.retryNotBefore == fixture.clock.now.addingTimeInterval(120))
        let hopeless = try fixture.createDownload()
        fixture.daemon.completion.retryOrFail(hopeless, in: fixture.session, after: .serverAskedToWait(status: 503, seconds: 1e12))
        #expect(ending(hopeless.taskIdentifier, in: fixture)?.error?.code == TransferFailure.timedOut)
    }
}
