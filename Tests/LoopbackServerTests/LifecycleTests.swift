import Foundation
import Glibc
import Testing
@testable import LoopbackServer

/// Binding, stopping and concurrency.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
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

    /// The accept thread waits in accept() on the listening socket, which stop() wakes with
    /// shutdown() through the listener's number. Here another socket takes that number (as a
    /// descriptor closed twice elsewhere in the process would let happen), so shutdown() no
    /// longer reaches the socket accept() waits on: stop() must end all the same (it waited
    /// for ever once in a whole-suite run, and the test that called it hit its time limit).
    @Test func stopEndsWhenTheListenersNumberWasTakenOver() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("x".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/a")
        #expect(try client.readResponse().status == 200, "the accept thread is back in accept()")
        let other = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(other >= 0)
        defer { close(other) }
        try #require(dup2(other, server.listenerDescriptor) == server.listenerDescriptor)
        let started = Date()
        server.stop()
        #expect(Date().timeIntervalSince(started) < 10, "stop() ended")
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

    @Test func concurrentClients() throws {
        let server = try LoopbackServer()
        let data = testBytes(200_000)
        server.serve("/d", data: data)
        let port = server.port
        // Real threads, not tasks: the clients block in socket reads, and blocking the
        // cooperative pool (two threads here) starves every other test running beside this one.
        let group = DispatchGroup()
        let failed = FailureCount()
        for _ in 0..<16 {
            group.enter()
            Thread {
                defer { group.leave() }
                do {
                    let client = try RawHTTPClient(port: port)
                    for _ in 0..<3 {
                        try client.request("GET", "/d")
                        guard try client.readResponse().data == data else { throw CocoaError(.fileReadCorruptFile) }
                    }
                } catch {
                    failed.add()
                }
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        #expect(failed.value == 0)
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

/// A counter that client threads bump when they fail.
private final class FailureCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
