import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferPOSIX

/// A default session's 401 that no credential answers ends the task with that response and
/// no error (S9.3); its completion handler, and the async form, get the 401's body with it,
/// as Apple's do (the server's explanation is often in it).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(5)))
final class UnansweredChallengeBodyTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// What the loopback server sends with its 401.
    static let challengeBody = Data("401 Unauthorized\n".utf8)

    @Test("A completion handler gets the 401's status and body, and no error, when no credential answers the challenge")
    func handlerGetsBody() throws {
        server.serve("/locked/report", data: Data("the report".utf8))
        server.protect("/locked", with: .basic(users: ["ada": "lovelace"]))
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let got = Locked<(Data?, Int?, Error?)?>(nil)
        let done = DispatchSemaphore(value: 0)
        session.dataTask(with: server.url(for: "/locked/report")) { data, response, error in
            got.withLock { $0 = (data, (response as? HTTPURLResponse)?.statusCode, error) }
            done.signal()
        }.resume()
        #expect(done.wait(timeout: .now() + 20) == .success, "the handler was called")
        let (data, status, error) = try #require(got.withLock { $0 })
        #expect(status == 401)
        #expect(error == nil)
        #expect(data == Self.challengeBody)
    }

    @Test("data(from:) returns the 401's body with it")
    func asyncGetsBody() async throws {
        server.serve("/locked/report", data: Data("the report".utf8))
        server.protect("/locked", with: .basic(users: ["ada": "lovelace"]))
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let (data, response) = try await session.data(from: server.url(for: "/locked/report"))
        #expect((response as? HTTPURLResponse)?.statusCode == 401)
        #expect(data == Self.challengeBody)
    }
}
}
