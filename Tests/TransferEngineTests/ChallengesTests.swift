import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX

/// The fixture.parts.challenges built with no daemon: one fixture.session in a container of the test's own, and a
/// stub of their fixture.surroundings that records what they ask of the rest of the daemon. A `401`
/// that offers Basic holds its task and has the app asked; the app's credential is what the
/// retry sends; with no credential the `401` is delivered as it is.
@Suite final class ChallengesTests {
    let fixture: SessionParts

    init() throws {
        fixture = try SessionParts("fixture.parts.challenges")
    }

    /// A running download whose attempt ended with a 401 carrying `headers`.
    private func download(answered headers: [String: String]) throws -> TaskRecord {
        let url = "http://127.0.0.1:9/private"
        var task = try fixture.session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: url)), inBackground: false, pendingFailure: nil, at: .distantPast)
        task.state = .running
        task.response = ResponseRecord(url: url, statusCode: 401, headers: headers)
        fixture.session.update(task)
        return task
    }

    @Test("A 401 offering Basic holds the task with a challenge and has the app told; the app's credential is what the retry sends")
    func basicChallengeAnswered() throws {
        let task = try download(answered: ["WWW-Authenticate": "Basic realm=\"private\""])
        #expect(fixture.parts.challenges.takeChallenge(task, in: fixture.session))
        let held = try #require(fixture.session.tasks[task.taskIdentifier]?.pendingChallenge)
        #expect(held.protectionSpace == ProtectionSpaceRecord(host: "127.0.0.1", port: 9, protocol: "http", realm: "private", method: .basic, isProxy: false))
        #expect(held.previousFailureCount == 0, "nothing was sent yet")
        #expect(fixture.surroundings.announced == [fixture.session.key], "the app is told (or launched for it)")
        #expect(fixture.parts.challenges.credentials(for: task, in: fixture.session).server == nil)

        let credential = CredentialRecord(user: "ada", password: "secret", persistence: .forSession)
        let retried = try #require(try fixture.parts.challenges.answerChallenge(ChallengeAnswer(disposition: .useCredential, credential: credential), for: task.taskIdentifier, in: fixture.session))
        #expect(retried.pendingChallenge == nil, "no longer held")
        #expect(fixture.surroundings.schedulingRequests == 2, "held, then free to go again")
        #expect(fixture.parts.challenges.credentials(for: retried, in: fixture.session).server?.credential == credential)
        #expect(fixture.surroundings.completed.isEmpty)
    }

    @Test("A 401 with no credential given is delivered as it is; one offering no scheme the daemon answers is not held")
    func challengeDelivered() throws {
        let task = try download(answered: ["WWW-Authenticate": "Basic realm=\"private\""])
        #expect(fixture.parts.challenges.takeChallenge(task, in: fixture.session))
        #expect(try fixture.parts.challenges.answerChallenge(ChallengeAnswer(disposition: .performDefaultHandling, credential: nil), for: task.taskIdentifier, in: fixture.session) == nil)
        #expect(fixture.surroundings.completed == [task.taskIdentifier], "the 401 is the download's response")

        let negotiate = try download(answered: ["WWW-Authenticate": "Negotiate"])
        #expect(!fixture.parts.challenges.takeChallenge(negotiate, in: fixture.session))
        #expect(fixture.session.tasks[negotiate.taskIdentifier]?.pendingChallenge == nil)
        #expect(fixture.surroundings.announced == [fixture.session.key], "only the first was announced")
    }
}
