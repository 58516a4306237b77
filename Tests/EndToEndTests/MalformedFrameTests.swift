import Foundation
import Testing
import BackgroundTransfer

/// A request the daemon cannot read is answered so that the client can tell which one it was:
/// under its own number when that can be read, and otherwise with number 0 and the connection
/// closed, never a reply nobody can match on a connection left open. Real daemon, raw socket.
@Suite(.timeLimit(.minutes(20)))
struct MalformedFrameTests {
    @Test("An unreadable request whose number can be read (from its JSON, or from the {\"id\":N a body that is not JSON begins with) is refused under that number and the connection goes on; one without a readable number gets number 0 and is closed")
    func unreadableRequests() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let peer = try RawClient(container)
        defer { peer.close() }

        try peer.send(body: Data(#"{"id":7,"request":{"noSuchRequest":{}}}"#.utf8))
        let numbered = peer.nextReply()
        #expect(numbered?.id == 7, "the refusal names request 7: \(String(describing: numbered))")
        #expect(numbered?.reply.failureMessage?.contains("unreadable request") == true, "\(String(describing: numbered))")
        let ping = try peer.request(.ping, id: 8)
        #expect(ping.map { if case .ok = $0 { true } else { false } } == true, "the connection goes on: \(String(describing: ping))")

        // Not JSON at all, but beginning as a request does: cut short, bytes after it, a
        // broken string. Each is refused under its number, and the connection goes on.
        let broken = [
            (9, #"{"id":9,"request":{"ping":{}}"#),
            (10, #"{"id":10,"request":{"ping":{}}}trailing"#),
            (11, " { \"id\" : 11 , \"request\": {\"open\": {\"x\": \"\u{1}"),
        ]
        for (id, body) in broken {
            try peer.send(body: Data(body.utf8))
            let answered = peer.nextReply()
            #expect(answered?.id == UInt64(id), "\(body.debugDescription): \(String(describing: answered))")
            #expect(answered?.reply.failureMessage?.contains("unreadable request") == true,
                    "\(String(describing: answered))")
        }
        let after = try peer.request(.ping, id: 12)
        #expect(after.map { if case .ok = $0 { true } else { false } } == true,
                "the connection goes on: \(String(describing: after))")

        try peer.send(body: Data("not a request".utf8))
        let unnumbered = peer.nextReply()
        #expect(unnumbered?.id == 0, "\(String(describing: unnumbered))")
        #expect(unnumbered?.reply.failureMessage?.contains("connection is closed") == true, "\(String(describing: unnumbered))")
        #expect(peer.waitUntilClosed(timeout: 10), "the daemon closes a connection it cannot match replies on")
    }
}

/// A refusal the daemon sends with number 0 before closing reaches the app as the daemon's
/// reason, not as a lost connection: here the daemon has no room for another connection.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ConnectionRefusalTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    @Test("A session opened while the daemon serves all the connections its open-file limit leaves room for is invalid with -1011, the daemon's refusal")
    func refusedConnectionReachesTheApp() throws {
        // 80 open files less the reserve (64 + 4 for one transfer slot): 12 connections.
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--max-transfers", "1"], openFileLimit: 80)
        var held: [RawClient] = []
        defer { held.forEach { $0.close() } }
        for number in 1...12 {
            let peer = try RawClient(container)
            held.append(peer)
            let ping = try peer.request(.ping, id: 1)
            try #require(ping.map { if case .ok = $0 { true } else { false } } == true, "connection \(number) is served: \(String(describing: ping))")
        }
        let delegate = RecordingDelegate()
        let session = fixture.session("refused", delegate: delegate)
        defer { session.invalidateAndCancel() }
        #expect(delegate.wait(timeout: 30) { if case .invalid(code: -1011) = $0 { true } else { false } }, "\(delegate.calls)")
    }
}
}
