import Foundation
import Testing
@testable import LoopbackServer
import HTTPFormats

/// Range and If-Range handling.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
struct RangeTests {
    static let size = 10_000

    @Test(arguments: [
        ("bytes=100-199", 100..<200),
        ("bytes=9000-", 9000..<10_000),
        ("bytes=-500", 9500..<10_000),
        ("bytes=9990-20000", 9990..<10_000),   // end clamped to the size
        ("bytes=-20000", 0..<10_000),          // suffix longer than the body
        ("bytes=0-0", 0..<1),
    ])
    func satisfiableRangeGives206(header: String, expected: Range<Int>) throws {
        let server = try LoopbackServer()
        let file = try TempFile(size: Self.size)
        defer { file.remove() }
        server.serve("/f", file: file.url)

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/f", ["Range: \(header)"])
        let response = try client.readResponse()
        #expect(response.status == 206)
        #expect(response.data == file.contents.subdata(in: expected))
        #expect(response.header("Content-Range") == "bytes \(expected.lowerBound)-\(expected.upperBound - 1)/\(Self.size)")
        #expect(response.header("Content-Length") == String(expected.count))
        #expect(server.bytesSent == Int64(expected.count))
    }

    @Test(arguments: ["bytes=10000-", "bytes=20000-30000", "bytes=-0"])
    func unsatisfiableRangeGives416(header: String) throws {
        let server = try LoopbackServer()
        server.serve("/d", data: testBytes(Self.size))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/d", ["Range: \(header)"])
        let response = try client.readResponse()
        #expect(response.status == 416)
        #expect(response.header("Content-Range") == "bytes */\(Self.size)")
        #expect(String(decoding: response.body, as: UTF8.self).contains("416 Requested Range Not Satisfiable"))
        #expect(response.header("Content-Length") == String(response.body.count))
        // The connection stays usable.
        try client.request("GET", "/d")
        #expect(try client.readResponse().status == 200)
    }

    @Test(arguments: ["bytes=0-1,5-6", "bytes=5-1", "items=0-1", "bytes=abc", "bytes=-"])
    func multipleOrInvalidRangesGiveWholeBody(header: String) throws {
        let server = try LoopbackServer()
        let data = testBytes(Self.size)
        server.serve("/d", data: data)
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/d", ["Range: \(header)"])
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.data == data)
    }

    @Test func rangesIgnoredWhenNotAccepted() throws {
        let server = try LoopbackServer()
        let data = testBytes(Self.size)
        server.serve("/d", data: data, options: RouteOptions(acceptsRanges: false))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/d", ["Range: bytes=0-9"])
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.data == data)
        #expect(response.header("Accept-Ranges") == nil)
        #expect(response.header("Content-Range") == nil)
    }

    @Test func ifRangeWithETag() throws {
        let server = try LoopbackServer()
        let file = try TempFile(size: Self.size)
        defer { file.remove() }
        server.serve("/f", file: file.url)
        let client = try RawHTTPClient(port: server.port)
        try client.request("HEAD", "/f")
        let etag = try #require(try client.readResponse(forHead: true).header("ETag"))

        try client.request("GET", "/f", ["Range: bytes=10-19", "If-Range: \(etag)"])
        let match = try client.readResponse()
        #expect(match.status == 206)
        #expect(match.data == file.contents.subdata(in: 10..<20))

        try client.request("GET", "/f", ["Range: bytes=10-19", "If-Range: \"something-else\""])
        let mismatch = try client.readResponse()
        #expect(mismatch.status == 200)
        #expect(mismatch.data == file.contents)

        // Weak tags never match (If-Range uses strong comparison).
        try client.request("GET", "/f", ["Range: bytes=10-19", "If-Range: W/\(etag)"])
        #expect(try client.readResponse().status == 200)
    }

    @Test func ifRangeWithDate() throws {
        let server = try LoopbackServer()
        let data = testBytes(Self.size)
        server.serve("/d", data: data, options: RouteOptions(validators: .lastModifiedOnly))
        let client = try RawHTTPClient(port: server.port)
        try client.request("HEAD", "/d")
        let lastModified = try #require(try client.readResponse(forHead: true).header("Last-Modified"))
        let seconds = try #require(HTTPDate.parse(lastModified))

        try client.request("GET", "/d", ["Range: bytes=-100", "If-Range: \(lastModified)"])
        let match = try client.readResponse()
        #expect(match.status == 206)
        #expect(match.data == data.suffix(100))

        try client.request("GET", "/d", ["Range: bytes=-100", "If-Range: \(HTTPDate.format(seconds - 1))"])
        let mismatch = try client.readResponse()
        #expect(mismatch.status == 200)
        #expect(mismatch.data == data)
    }

    @Test func ifRangeNeverMatchesWithoutValidators() throws {
        let server = try LoopbackServer()
        let data = testBytes(Self.size)
        server.serve("/d", data: data, options: RouteOptions(validators: .none))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/d", ["Range: bytes=0-9", "If-Range: \(HTTPDate.format(Int(Date().timeIntervalSince1970)))"])
        #expect(try client.readResponse().status == 200)
        // Without If-Range, the range is still honoured.
        try client.request("GET", "/d", ["Range: bytes=0-9"])
        #expect(try client.readResponse().status == 206)
    }

    @Test func headIgnoresRange() throws {
        let server = try LoopbackServer()
        server.serve("/d", data: testBytes(Self.size))
        let client = try RawHTTPClient(port: server.port)
        try client.request("HEAD", "/d", ["Range: bytes=0-9"])
        let response = try client.readResponse(forHead: true)
        #expect(response.status == 200)
        #expect(response.header("Content-Length") == String(Self.size))
    }

    @Test func rangeParsing() {
        #expect(ByteRangeSpec("bytes=1-2") == .closed(1, 2))
        #expect(ByteRangeSpec(" Bytes = 7 - ") == .from(7))
        #expect(ByteRangeSpec("bytes=-3") == .suffix(3))
        #expect(ByteRangeSpec("bytes=99999999999999999999999-") == .from(.max))
        #expect(ByteRangeSpec("bytes=1-2,3-4") == nil)
        #expect(ByteRangeSpec("bytes=") == nil)
        #expect(ByteRangeSpec.suffix(3).resolve(size: 0) == nil)
        #expect(ByteRangeSpec.from(.max).resolve(size: 10) == nil)
    }

    @Test func httpDateRoundTrip() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == nil)
    }
}
