import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX

/// The challenges built with no daemon: one session in a container of the test's own, and a
/// stub of their surroundings that records what they ask of the rest of the daemon. A `401`
/// that offers Basic holds its task and has the app asked; the app's credential is what the
/// retry sends; with no credential the `401` is delivered as it is.
@Suite final class ChallengesTests {
    let container: SessionFixture
    var session: DaemonSession { container.session }
    let parts: SchedulerParts
    var challenges: Challenges { parts.challenges }
    var surroundings: SchedulerPartsStub { parts.surroundings }

    init() throws {
        container = try SessionFixture("challenges")
        parts = try SchedulerParts(layout: container.layout, root: RootDirectory.open(container.root.path), log: container.log)
    }

    /// A running download whose attempt ended with a 401 carrying `headers`.
    private func download(answered headers: [String: String]) throws -> TaskRecord {
        let url = "http://127.0.0.1:9/private"
        var task = try session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: url)), inBackground: false, pendingFailure: nil, at: .distantPast)
        task.state = .running
        task.response = ResponseRecord(url: url, statusCode: 401, headers: headers)
        session.update(task)
        return task
    }

    @Test("A 401 offering Basic holds the task with a challenge and has the app told; the app's credential is what the retry sends")
    func basicChallengeAnswered() throws {
        let task = try download(answered: ["WWW-Authenticate": "Basic realm=\"private\""])
        #expect(challenges.takeChallenge(task, in: session))
        let held = try #require(session.tasks[task.taskIdentifier]?.pendingChallenge)
        #expect(held.protectionSpace == ProtectionSpaceRecord(host: "127.0.0.1", port: 9, protocol: "http", realm: "private", method: .basic, isProxy: false))
        #expect(held.previousFailureCount == 0, "nothing was sent yet")
        #expect(surroundings.announced == [session.key], "the app is told (or launched for it)")
        #expect(challenges.credentials(for: task, in: session).server == nil)

        let credential = CredentialRecord(user: "ada", password: "secret", persistence: .forSession)
        let retried = try #require(try challenges.answerChallenge(ChallengeAnswer(disposition: .useCredential, credential: credential), for: task.taskIdentifier, in: session))
        #expect(retried.pendingChallenge == nil, "no longer held")
        #expect(surroundings.schedulingRequests == 2, "held, then free to go again")
        #expect(challenges.credentials(for: retried, in: session).server?.credential == credential)
        #expect(surroundings.completed.isEmpty)
    }

    @Test("A 401 with no credential given is delivered as it is; one offering no scheme the daemon answers is not held")
    func challengeDelivered() throws {
        let task = try download(answered: ["WWW-Authenticate": "Basic realm=\"private\""])
        #expect(challenges.takeChallenge(task, in: session))
        #expect(try challenges.answerChallenge(ChallengeAnswer(disposition: .performDefaultHandling, credential: nil), for: task.taskIdentifier, in: session) == nil)
        #expect(surroundings.completed == [task.taskIdentifier], "the 401 is the download's response")

        let negotiate = try download(answered: ["WWW-Authenticate": "Negotiate"])
        #expect(!challenges.takeChallenge(negotiate, in: session))
        #expect(session.tasks[negotiate.taskIdentifier]?.pendingChallenge == nil)
        #expect(surroundings.announced == [session.key], "only the first was announced")
    }
}
