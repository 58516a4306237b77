import Foundation
import Glibc
import Testing
@testable import LoopbackServer

/// HTTP/1.1 connection handling: keep-alive, request bodies, malformed input.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
struct ProtocolTests {
    @Test func keepAliveServesTwoRequestsOnOneConnection() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("first".utf8))
        server.serve("/b", data: Data("second".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/a")
        let first = try client.readResponse()
        try client.request("GET", "/b")
        let second = try client.readResponse()
        #expect(first.data == Data("first".utf8))
        #expect(second.data == Data("second".utf8))
        #expect(first.header("Connection") == nil)
        #expect(server.requests.count == 2)
        #expect(server.requests[0].connectionID == server.requests[1].connectionID)
    }

    @Test func pipelinedRequestsAnsweredInOrder() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("A".utf8))
        server.serve("/b", data: Data("B".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().data == Data("A".utf8))
        #expect(try client.readResponse().data == Data("B".utf8))
    }

    @Test func connectionCloseIsHonoured() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("x".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/a", ["Connection: close"])
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.header("Connection") == "close")
        #expect(client.isClosedByServer())
    }

    @Test func http10ClosesUnlessKeepAlive() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("x".utf8))

        let plain = try RawHTTPClient(port: server.port)
        try plain.send("GET /a HTTP/1.0\r\n\r\n")
        #expect(try plain.readResponse().status == 200)
        #expect(plain.isClosedByServer())

        let keepAlive = try RawHTTPClient(port: server.port)
        try keepAlive.send("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(try keepAlive.readResponse().header("Connection") == "keep-alive")
        try keepAlive.send("GET /a HTTP/1.0\r\n\r\n")
        #expect(try keepAlive.readResponse().status == 200)
    }

    @Test func requestBodyIsDrainedBeforeTheNextRequest() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("served".utf8))
        let client = try RawHTTPClient(port: server.port)
        let body = String(repeating: "z", count: 300_000)
        try client.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
        let post = try client.readResponse()
        #expect(post.status == 405)
        #expect(post.header("Allow") == "GET, HEAD")

        try client.send("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd")
        #expect(try client.readResponse().data == Data("served".utf8))

        try client.send("PUT /nope HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;ext=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: t\r\n\r\n")
        #expect(try client.readResponse().status == 404)

        try client.request("GET", "/a")
        #expect(try client.readResponse().data == Data("served".utf8))
        #expect(server.requests.map(\.bodyLength) == [300_000, 4, 21, 0])
        #expect(Set(server.requests.map(\.connectionID)).count == 1)
    }

    @Test func expectContinueGetsInterimResponse() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("x".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        #expect(try client.readResponse().status == 100)
        try client.send("hello")
        #expect(try client.readResponse().status == 405)
        #expect(server.requests.first?.bodyLength == 5)
    }

    @Test(arguments: [
        ("GARBAGE\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\n\r\n", 400),                                  // no Host
        ("GET /a HTTP/1.1\r\nHost : x\r\n\r\n", 400),                      // space before colon
        ("GET /a HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400),
        ("GET  /a HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET a HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET /a HTTP/1.1\rHost: x\r\n\r\n", 400),                         // bare CR
        ("GET /a HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("GET /a FTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        ("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY", 400),
        ("GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ])
    func malformedRequestIsRefusedAndServerKeepsServing(request: String, status: Int) throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("ok".utf8))
        let bad = try RawHTTPClient(port: server.port)
        try bad.send(request)
        let response = try bad.readResponse()
        #expect(response.status == status)
        #expect(response.header("Connection") == "close")
        #expect(bad.isClosedByServer())

        let good = try RawHTTPClient(port: server.port)
        try good.request("GET", "/a")
        #expect(try good.readResponse().data == Data("ok".utf8))
    }

    @Test func oversizedHeadGets431() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("ok".utf8))
        let bad = try RawHTTPClient(port: server.port)
        try bad.send("GET /a HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 70_000) + "\r\n\r\n")
        #expect(try bad.readResponse().status == 431)

        let good = try RawHTTPClient(port: server.port)
        try good.request("GET", "/a", ["X-Fits: " + String(repeating: "b", count: 60_000)])
        #expect(try good.readResponse().status == 200)
    }

    @Test func binaryJunkNeverCrashesTheServer() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("ok".utf8))
        for seed in 1...20 {
            let client = try RawHTTPClient(port: server.port)
            var junk = [UInt8](testBytes(2000, seed: UInt64(seed)))
            junk += Array("\r\n\r\n".utf8)
            try? client.send(junk)
            _ = try? client.readResponse()
        }
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/a")
        #expect(try client.readResponse().status == 200)
    }

    @Test func absoluteFormTargetAndLeadingBlankLines() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: Data("ok".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.send("\r\nGET http://127.0.0.1/a?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try client.readResponse().data == Data("ok".utf8))
        #expect(server.requests.first?.path == "/a")
        #expect(server.requests.first?.query == "q=1")
    }

    @Test func parserHandlesLFOnlyLines() throws {
        let head = try HTTPRequestParser.parseHead(ArraySlice("GET /x HTTP/1.1\nHost: h\nA:  b \n\n".utf8))
        #expect(head.method == "GET")
        #expect(head.headers["a"] == "b")
        #expect(head.wantsKeepAlive)
    }
}
