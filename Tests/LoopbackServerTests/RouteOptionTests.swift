import Foundation
import FoundationNetworking
import Testing
@testable import LoopbackServer

/// Framing and injected faults: chunked bodies, early drops, fixed statuses, redirects,
/// throttling.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
struct RouteOptionTests {
    @Test func chunkedBodyDecodes() throws {
        let server = try LoopbackServer()
        // Larger than one 1 MiB chunk, not a multiple of it.
        let file = try TempFile(size: 2 * 1024 * 1024 + 12345)
        defer { file.remove() }
        server.serve("/c", file: file.url, options: RouteOptions(omitContentLength: true))

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/c")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.header("Transfer-Encoding") == "chunked")
        #expect(response.header("Content-Length") == nil)
        #expect(!response.truncated)
        #expect(response.data == file.contents)
        // The terminating chunk left the connection in step.
        try client.request("GET", "/c", ["Range: bytes=5-9"])
        let partial = try client.readResponse()
        #expect(partial.status == 206)
        #expect(partial.data == file.contents.subdata(in: 5..<10))
    }

    @Test func chunkedBodyWithURLSession() async throws {
        let server = try LoopbackServer()
        let data = testBytes(300_000)
        server.serve("/c", data: data, options: RouteOptions(omitContentLength: true))
        let (received, response) = try await URLSession(configuration: .ephemeral).data(from: server.url(for: "/c"))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(received == data)
    }

    @Test func chunkedToHTTP10IsDelimitedByClose() throws {
        let server = try LoopbackServer()
        let data = testBytes(5000)
        server.serve("/c", data: data, options: RouteOptions(omitContentLength: true))
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /c HTTP/1.0\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.header("Transfer-Encoding") == nil)
        #expect(response.data == data)
    }

    @Test func dropAfterBytesClosesEarly() throws {
        let server = try LoopbackServer()
        let data = testBytes(100_000)
        server.serve("/drop", data: data, options: RouteOptions(dropAfterBytes: 10_000))

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/drop")
        let first = try client.readResponse()
        #expect(first.status == 200)
        #expect(first.header("Content-Length") == "100000")
        #expect(first.truncated)
        #expect(first.data == data.prefix(10_000))
        #expect(client.isClosedByServer())

        // Per response: a resumed request is cut again after as many bytes.
        let resumed = try RawHTTPClient(port: server.port)
        try resumed.request("GET", "/drop", ["Range: bytes=10000-"])
        let second = try resumed.readResponse()
        #expect(second.status == 206)
        #expect(second.truncated)
        #expect(second.data == data.subdata(in: 10_000..<20_000))
        #expect(server.bytesSent == 20_000)

        // A body no longer than the limit goes out whole.
        let tail = try RawHTTPClient(port: server.port)
        try tail.request("GET", "/drop", ["Range: bytes=-10000"])
        let third = try tail.readResponse()
        #expect(third.status == 206)
        #expect(!third.truncated)
        #expect(third.data == data.suffix(10_000))
    }

    @Test func dropAfterBytesInChunkedBody() throws {
        let server = try LoopbackServer()
        let data = testBytes(50_000)
        server.serve("/drop", data: data, options: RouteOptions(omitContentLength: true, dropAfterBytes: 1234))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/drop")
        let response = try client.readResponse()
        #expect(response.truncated)
        #expect(response.data == data.prefix(1234))
    }

    @Test func status503WithRetryAfter() throws {
        let server = try LoopbackServer()
        server.serve("/busy", data: testBytes(100), options: RouteOptions(status: 503, retryAfter: 7))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/busy")
        let response = try client.readResponse()
        #expect(response.status == 503)
        #expect(response.header("Retry-After") == "7")
        #expect(String(decoding: response.body, as: UTF8.self) == "503 Service Unavailable\n")
        #expect(server.bytesSent == Int64(response.body.count))
    }

    @Test(arguments: [404, 500, 429])
    func fixedStatus(status: Int) throws {
        let server = try LoopbackServer()
        server.serve("/s", data: testBytes(100), options: RouteOptions(status: status))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/s")
        let response = try client.readResponse()
        #expect(response.status == status)
        #expect(response.header("Retry-After") == nil)
        // Keep-alive survives error statuses.
        try client.request("GET", "/s")
        #expect(try client.readResponse().status == status)
    }

    @Test func redirect() async throws {
        let server = try LoopbackServer()
        let data = testBytes(1000)
        server.serve("/target", data: data)
        server.serve("/old", data: Data(), options: RouteOptions(redirectTo: "/target"))

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/old")
        let response = try client.readResponse()
        #expect(response.status == 302)
        #expect(response.header("Location") == server.url(for: "/target").absoluteString)

        let (received, followed) = try await URLSession(configuration: .ephemeral).data(from: server.url(for: "/old"))
        #expect((followed as? HTTPURLResponse)?.statusCode == 200)
        #expect(received == data)
    }

    @Test func throttledBodyTakesItsTime() throws {
        let server = try LoopbackServer()
        let data = testBytes(40_000)
        server.serve("/slow", data: data, options: RouteOptions(bytesPerSecond: 200_000))
        let client = try RawHTTPClient(port: server.port)
        let started = Date()
        try client.request("GET", "/slow")
        let response = try client.readResponse()
        // 40 000 bytes at 200 000 B/s cannot arrive in much under 0.2 s.
        #expect(Date().timeIntervalSince(started) >= 0.15)
        #expect(response.data == data)
    }
}
