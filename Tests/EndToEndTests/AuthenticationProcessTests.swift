import Foundation
import Testing
import LoopbackServer
import TransferContainer
import Digests

/// A challenge with no process attached: the daemon launches the containing app for the
/// session, as for events, and the transfer goes on with its answer (S3.1, S1.6).
@Suite(.timeLimit(.minutes(20)))
struct AuthenticationProcessTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("An extension's download behind Basic auth: the host is launched for the challenge, answers from its keychain, and gets the file; the password is in no log, inspection or file outside the host's private container")
    func challengeRelaunchesTheHost() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 1 << 20, seed: 41)
        server.serve("/vault/report.bin", data: payload)
        server.protect("/vault", with: .basic(realm: "vault", users: ["alice": "s3cret-pass"]))
        _ = try DaemonUnderTest.start(container)

        let remembered = try Executable.hostApp.run(["remember-password", "vault", "alice", "s3cret-pass"], in: container)
        #expect(remembered.status == 0, "\(remembered.stderr)")
        // Offline until the extension has exited: a challenge that came while it was still
        // attached would go to the extension's own delegate, not to a launched host.
        #expect(try Executable.bgtransfer.run(["conditions", "--network", "offline"], in: container).status == 0)
        let started = try Executable.fetchExtension.run(["download", server.url(for: "/vault/report.bin").absoluteString], in: container)
        #expect(started.status == 0, "\(started.stderr)")
        #expect(try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container).status == 0)

        let answered = container.waitForLog { $0.process == "host-app" && $0.message.hasPrefix("didReceive challenge: task 1, Basic realm \"vault\" at 127.0.0.1:\(server.port), previous failures 0: answered with the keychain's password for alice") }
        #expect(answered?.session == Self.fetchSession, "the host was launched for the extension's session to answer")
        let delivered = container.waitForLog { $0.process == "host-app" && $0.isDidCompleteWithoutError(task: 1, status: 200) }
        #expect(delivered != nil, "the download finished and the host was launched again for its events")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("report.bin").path) == SHA256.hexDigest(of: payload))
        // One whole authorized GET; any other authorized one is a resume of it (a cut connection
        // under load), never a second whole download. What happened is in the message.
        let accepted = server.authenticationCounts(at: "/vault/report.bin").acceptedUsers
        let authorized = server.requests.filter { $0.path == "/vault/report.bin" && $0.header("Authorization") != nil }
        let story = authorized.map { "\($0.method) Range: \($0.header("Range") ?? "none"), connection \($0.connectionID)" }
            + container.logEntries().filter { $0.task == 1 && $0.process == "transferd" }.map(\.message)
        #expect(!accepted.isEmpty && accepted.allSatisfy { $0 == "alice" }, "\(accepted)")
        #expect(authorized.filter { $0.header("Range") == nil }.count == 1, "\(story)")
        #expect(accepted.count == authorized.count, "\(story)")

        let secrets = ["s3cret-pass", Data("alice:s3cret-pass".utf8).base64EncodedString()]
        let hostPrivate = container.layout.privateContainer(try BundleIdentifier("com.example.host")).path
        #expect(secretFiles(in: container, containing: secrets, outside: hostPrivate).isEmpty, "only the host's own keychain holds the password")
        for command in [["log", "--level", "debug"], ["inspect"], ["inspect", "--json"]] {
            let output = try Executable.bgtransfer.run(command, in: container).stdout
            #expect(!secrets.contains { output.contains($0) }, "bgtransfer \(command) shows no secret")
        }
    }
}
