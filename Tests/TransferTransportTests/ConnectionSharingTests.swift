import Foundation
import TestPeers
import Testing
import LoopbackServer
@testable import TransferTransport

/// Transfers to one plain-http origin run side by side, each on a connection of its own:
/// HTTP/1.1 carries one exchange at a time, so waiting to share a connection would queue every
/// transfer to the origin behind the one in progress, however slowly its server answers.
@Suite(.timeLimit(.minutes(20)))
struct ConnectionSharingTests {
    @Test("Three downloads from one http origin whose server trickles: all three requests reach it at once, not one after the other")
    func slowResponseDoesNotQueueTheOthers() async throws { try await onOwnThread { try Self.slowResponseDoesNotQueueTheOthersOnItsThread() } }

    static func slowResponseDoesNotQueueTheOthersOnItsThread() throws {
        let server = try LoopbackServer()
        defer { server.stop() }
        // 8 bytes, one every 0.5 s: each response takes 4 s.
        server.serve("/slow", data: Data("trickles".utf8), options: RouteOptions(trickleInterval: 0.5))
        let multi = try CurlMulti()
        var handles: [CurlEasy] = []
        for index in 0..<3 {
            let easy = try CurlEasy()
            try easy.setURL(server.url(for: "/slow?\(index)").absoluteString)
            try multi.add(easy)
            handles.append(easy)
        }
        let start = Date()
        var allArrivedAfter: TimeInterval?
        var finished = 0
        var none: [CurlMulti.PollRequest] = []
        while finished < handles.count && Date().timeIntervalSince(start) < 30 {
            try multi.perform()
            while multi.nextCompletion() != nil { finished += 1 }
            if allArrivedAfter == nil && server.requests.count >= handles.count { allArrivedAfter = Date().timeIntervalSince(start) }
            try multi.poll(extra: &none, timeout: .milliseconds(20))
        }
        #expect(finished == handles.count, "the downloads did not finish")
        let arrived = try #require(allArrivedAfter, "only \(server.requests.count) requests reached the server")
        // One after the other, the third would arrive after two whole responses (8 s).
        #expect(arrived < 2, "the third request reached the server after \(arrived) s")
        #expect(Set(server.requests.map(\.connectionID)).count == handles.count, "each on its own connection")
    }
}
