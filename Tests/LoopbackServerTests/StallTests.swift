import Foundation
import TestPeers
import Glibc
import Testing
@testable import LoopbackServer

/// Links that stall (issue 20): a head and then nothing, a body that stops part-way, a body
/// that trickles in a byte every few seconds. A raw client with short read deadlines sees
/// exactly what a transport would: silence on an open connection, not an end.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
struct StallTests {
    @Test func stallAfterHeadersSendsTheHeadThenNothing() async throws { try await onOwnThread { [self] in try self.stallAfterHeadersSendsTheHeadThenNothingOnItsThread() } }
    func stallAfterHeadersSendsTheHeadThenNothingOnItsThread() throws {
        let server = try LoopbackServer()
        let data = testBytes(10_000)
        server.serve("/s", data: data, options: RouteOptions(stallAfterBytes: 0))
        let client = try RawHTTPClient(port: server.port, timeout: 2)
        try client.request("GET", "/s")
        let head = try client.readResponseHead()
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "10000")
        let rest = try client.readUntilSilent()
        #expect(rest.bytes.isEmpty)
        #expect(!rest.closed, "a stalled link stays open")
        #expect(server.bytesSent == 0)
    }

    @Test func stallMidBodyStopsAfterTheBytesAndStaysOpen() async throws { try await onOwnThread { [self] in try self.stallMidBodyStopsAfterTheBytesAndStaysOpenOnItsThread() } }
    func stallMidBodyStopsAfterTheBytesAndStaysOpenOnItsThread() throws {
        let server = try LoopbackServer()
        let data = testBytes(100_000)
        server.serve("/s", data: data, options: RouteOptions(stallAfterBytes: 30_000))
        let client = try RawHTTPClient(port: server.port, timeout: 2)
        try client.request("GET", "/s")
        #expect(try client.readResponseHead().status == 200)
        let first = try client.readUntilSilent()
        #expect(first.bytes == Array(data.prefix(30_000)))
        #expect(!first.closed)

        // Per response, like dropAfterBytes: a resumed request stalls again after as many bytes.
        let resumed = try RawHTTPClient(port: server.port, timeout: 2)
        try resumed.request("GET", "/s", ["Range: bytes=30000-"])
        let head = try resumed.readResponseHead()
        #expect(head.status == 206)
        #expect(head.header("Content-Range") == "bytes 30000-99999/100000")
        let second = try resumed.readUntilSilent()
        #expect(second.bytes == Array(data.subdata(in: 30_000..<60_000)))
        #expect(!second.closed)
    }

    @Test func stallBeyondTheBodyIsNoStall() async throws { try await onOwnThread { [self] in try self.stallBeyondTheBodyIsNoStallOnItsThread() } }
    func stallBeyondTheBodyIsNoStallOnItsThread() throws {
        let server = try LoopbackServer()
        let data = testBytes(1000)
        server.serve("/s", data: data, options: RouteOptions(stallAfterBytes: 1000))
        let client = try RawHTTPClient(port: server.port, timeout: 2)
        try client.request("GET", "/s")
        let response = try client.readResponse()
        #expect(!response.truncated)
        #expect(response.data == data)
    }

    @Test func aClientThatGivesUpFreesTheStalledConnection() async throws { try await onOwnThread { [self] in try self.aClientThatGivesUpFreesTheStalledConnectionOnItsThread() } }
    func aClientThatGivesUpFreesTheStalledConnectionOnItsThread() throws {
        let server = try LoopbackServer()
        server.serve("/s", data: testBytes(1000), options: RouteOptions(stallAfterBytes: 10))
        do {
            let client = try RawHTTPClient(port: server.port, timeout: 2)
            try client.request("GET", "/s")
            _ = try client.readResponseHead()
            #expect(server.waitForRequests(count: 1, timeout: 5))
        }  // closed here
        // The server still answers others, and stop() does not hang on the stalled thread.
        server.serve("/ok", data: testBytes(10))
        let other = try RawHTTPClient(port: server.port, timeout: 2)
        try other.request("GET", "/ok")
        #expect(try other.readResponse().status == 200)
        let started = Date()
        server.stop()
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test func stopEndsAStallTheClientStillWaitsOn() async throws { try await onOwnThread { [self] in try self.stopEndsAStallTheClientStillWaitsOnOnItsThread() } }
    func stopEndsAStallTheClientStillWaitsOnOnItsThread() throws {
        let server = try LoopbackServer()
        server.serve("/s", data: testBytes(1000), options: RouteOptions(stallAfterBytes: 0))
        let client = try RawHTTPClient(port: server.port, timeout: 5)
        try client.request("GET", "/s")
        _ = try client.readResponseHead()
        let started = Date()
        server.stop()
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(try client.readUntilSilent().closed)
    }

    @Test func trickleSendsOneByteEachInterval() async throws { try await onOwnThread { [self] in try self.trickleSendsOneByteEachIntervalOnItsThread() } }
    func trickleSendsOneByteEachIntervalOnItsThread() throws {
        let server = try LoopbackServer()
        let data = testBytes(4)
        server.serve("/t", data: data, options: RouteOptions(trickleInterval: 0.5))
        let client = try RawHTTPClient(port: server.port, timeout: 5)
        let started = Date()
        try client.request("GET", "/t")
        let response = try client.readResponse()
        let elapsed = Date().timeIntervalSince(started)
        #expect(response.data == data)
        #expect(!response.truncated)
        // Four intervals of 0.5 s: at least 2 s, and not much more.
        #expect(elapsed >= 1.9 && elapsed < 4, "took \(elapsed) s")
    }

    @Test func trickleKeepsTheLinkAliveBetweenBytes() async throws { try await onOwnThread { [self] in try self.trickleKeepsTheLinkAliveBetweenBytesOnItsThread() } }
    func trickleKeepsTheLinkAliveBetweenBytesOnItsThread() throws {
        let server = try LoopbackServer()
        server.serve("/t", data: testBytes(3), options: RouteOptions(trickleInterval: 1.5))
        // A deadline shorter than the interval sees silence, but no end, between bytes.
        let client = try RawHTTPClient(port: server.port, timeout: 1)
        try client.request("GET", "/t")
        #expect(try client.readResponseHead().status == 200)
        let gap = try client.readUntilSilent()
        #expect(gap.bytes.isEmpty)
        #expect(!gap.closed)
        #expect(server.bytesSent <= 1)
    }
}
