import Foundation
import Glibc
import Testing
@testable import LoopbackServer

/// Binding, stopping and concurrency.
@Suite(.timeLimit(.minutes(1)))
struct LifecycleTests {
    @Test func eachServerGetsItsOwnPort() throws {
        let a = try LoopbackServer()
        let b = try LoopbackServer()
        #expect(a.port != 0)
        #expect(a.port != b.port)
    }

    @Test func stopClosesConnectionsAndListenerAndIsIdempotent() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("x".utf8))
        let idle = try RawHTTPClient(port: server.port)
        try idle.request("GET", "/a")
        #expect(try idle.readResponse().status == 200)
        let port = server.port

        server.stop()
        #expect(idle.isClosedByServer())
        #expect(throws: ClientError.self) { try RawHTTPClient(port: port) }
        server.stop()
    }

    @Test func stopInterruptsAThrottledTransfer() throws {
        let server = try LoopbackServer()
        // Would take 100 s to send.
        server.serve("/slow", data: testBytes(1_000_000), options: RouteOptions(bytesPerSecond: 10_000))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/slow")
        #expect(server.waitForRequests(count: 1, timeout: 5))
        let started = Date()
        server.stop()
        #expect(Date().timeIntervalSince(started) < 5)
        // The connection ends (possibly before the head went out) far short of the body.
        #expect(try client.readUntilClose().count < 1_000_000)
    }

    @Test func deinitStops() throws {
        var server: LoopbackServer? = try LoopbackServer()
        let port = server!.port
        server = nil
        #expect(throws: ClientError.self) { try RawHTTPClient(port: port) }
    }

    @Test func concurrentClients() async throws {
        let server = try LoopbackServer()
        let data = testBytes(200_000)
        server.serve("/d", data: data)
        let port = server.port
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let client = try RawHTTPClient(port: port)
                    for _ in 0..<3 {
                        try client.request("GET", "/d")
                        guard try client.readResponse().data == data else { return false }
                    }
                    return true
                }
            }
            for try await ok in group { #expect(ok) }
        }
        #expect(server.requests.count == 48)
        #expect(server.bytesSent == 48 * 200_000)
    }

    @Test func routesCanChangeWhileServing() throws {
        let server = try LoopbackServer()
        server.serve("/v", data: Data("one".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/v")
        #expect(try client.readResponse().data == Data("one".utf8))
        server.serve("/v", data: Data("two".utf8))
        try client.request("GET", "/v")
        #expect(try client.readResponse().data == Data("two".utf8))
    }
}
