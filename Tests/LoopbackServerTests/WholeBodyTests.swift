import Foundation
import FoundationNetworking
import Testing
@testable import LoopbackServer
import HTTPFormats

/// Whole-body GET and HEAD, headers, validators and the request log.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
struct WholeBodyTests {
    @Test func getFileWithURLSession() async throws {
        let server = try LoopbackServer()
        let file = try TempFile(size: 3 * 1024 * 1024 + 17)
        defer { file.remove() }
        server.serve("/file.bin", file: file.url)

        let (data, response) = try await URLSession(configuration: .ephemeral).data(from: server.url(for: "/file.bin"))
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(data == file.contents)
        #expect(http.value(forHTTPHeaderField: "Content-Length") == String(file.contents.count))
        #expect(http.value(forHTTPHeaderField: "Accept-Ranges") == "bytes")
        #expect(server.bytesSent == Int64(file.contents.count))
    }

    @Test func getHeadersAndValidators() throws {
        let server = try LoopbackServer()
        let file = try TempFile(size: 1000)
        defer { file.remove() }
        server.serve("/file.bin", file: file.url)

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/file.bin")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.data == file.contents)
        #expect(response.header("Content-Length") == "1000")
        #expect(response.header("Content-Type") == "application/octet-stream")
        #expect(response.header("Accept-Ranges") == "bytes")
        let etag = try #require(response.header("ETag"))
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count > 2)

        let mtime = try FileManager.default.attributesOfItem(atPath: file.url.path)[.modificationDate] as! Date
        let lastModified = try #require(response.header("Last-Modified"))
        #expect(HTTPDate.parse(lastModified) == Int(mtime.timeIntervalSince1970.rounded(.down)))
        #expect(lastModified.hasSuffix(" GMT"))
        #expect(response.header("Date") != nil)
    }

    @Test func headSendsHeadersButNoBody() throws {
        let server = try LoopbackServer()
        let data = testBytes(5000)
        server.serve("/data", data: data)

        let client = try RawHTTPClient(port: server.port)
        try client.request("HEAD", "/data")
        let head = try client.readResponse(forHead: true)
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "5000")
        #expect(head.header("ETag") != nil)
        // Had the HEAD answer carried a body, this GET's response would be misparsed.
        try client.request("GET", "/data")
        let get = try client.readResponse()
        #expect(get.status == 200)
        #expect(get.data == data)
        #expect(get.header("ETag") == head.header("ETag"))
        #expect(server.bytesSent == 5000)
    }

    @Test func validatorsNoneSendsNeither() throws {
        let server = try LoopbackServer()
        server.serve("/none", data: testBytes(100), options: RouteOptions(validators: .none))
        server.serve("/lm", data: testBytes(100), options: RouteOptions(validators: .lastModifiedOnly))

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/none")
        let none = try client.readResponse()
        #expect(none.status == 200)
        #expect(none.header("ETag") == nil)
        #expect(none.header("Last-Modified") == nil)

        try client.request("GET", "/lm")
        let lastModifiedOnly = try client.readResponse()
        #expect(lastModifiedOnly.header("ETag") == nil)
        #expect(lastModifiedOnly.header("Last-Modified") != nil)
    }

    @Test func dataETagsFollowContentAndCustomTagsAreQuoted() throws {
        let server = try LoopbackServer()
        server.serve("/a", data: testBytes(64, seed: 1))
        server.serve("/a2", data: testBytes(64, seed: 1))
        server.serve("/b", data: testBytes(64, seed: 2))
        server.serve("/custom", data: testBytes(64), options: RouteOptions(etag: "v1"))
        server.serve("/weak", data: testBytes(64), options: RouteOptions(etag: "W/\"v1\""))

        let client = try RawHTTPClient(port: server.port)
        var tags: [String: String] = [:]
        for path in ["/a", "/a2", "/b", "/custom", "/weak"] {
            try client.request("GET", path)
            tags[path] = try client.readResponse().header("ETag")
        }
        #expect(tags["/a"] != nil)
        #expect(tags["/a"] == tags["/a2"])
        #expect(tags["/a"] != tags["/b"])
        #expect(tags["/custom"] == "\"v1\"")
        #expect(tags["/weak"] == "W/\"v1\"")
    }

    @Test func suggestedFilenameSetsContentDisposition() throws {
        let server = try LoopbackServer()
        server.serve("/plain", data: Data("x".utf8), options: RouteOptions(suggestedFilename: "report 1.pdf"))
        server.serve("/quoted", data: Data("x".utf8), options: RouteOptions(suggestedFilename: "a\"b.txt"))
        server.serve("/unicode", data: Data("x".utf8), options: RouteOptions(suggestedFilename: "résumé.txt"))

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/plain")
        #expect(try client.readResponse().header("Content-Disposition") == "attachment; filename=\"report 1.pdf\"")
        try client.request("GET", "/quoted")
        #expect(try client.readResponse().header("Content-Disposition") == "attachment; filename=\"a\\\"b.txt\"")
        try client.request("GET", "/unicode")
        #expect(try client.readResponse().header("Content-Disposition")
            == "attachment; filename=\"r_sum_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt")
    }

    @Test func requestsAreRecordedInOrder() throws {
        let server = try LoopbackServer()
        server.serve("/x", data: Data("x".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/x?first=1", ["X-Test: One"])
        _ = try client.readResponse()
        try client.request("HEAD", "/missing")
        _ = try client.readResponse(forHead: true)

        #expect(server.waitForRequests(count: 2, timeout: 5))
        let requests = server.requests
        #expect(requests.map(\.method) == ["GET", "HEAD"])
        #expect(requests.map(\.path) == ["/x", "/missing"])
        #expect(requests[0].target == "/x?first=1")
        #expect(requests[0].query == "first=1")
        #expect(requests[0].header("x-test") == "One")
        #expect(requests[0].header("HOST") == "127.0.0.1")
        #expect(requests[0].httpVersion == "HTTP/1.1")
        #expect(requests[0].time <= requests[1].time)
    }

    @Test func waitForRequestsTimesOut() throws {
        let server = try LoopbackServer()
        let started = Date()
        #expect(server.waitForRequests(count: 1, timeout: 0.2) == false)
        #expect(Date().timeIntervalSince(started) >= 0.19)
    }

    @Test func urlForEncodesPathsAndRoutesMatchDecoded() async throws {
        let server = try LoopbackServer()
        server.serve("/dir/a b%.bin", data: Data("spaced".utf8))
        let url = server.url(for: "/dir/a b%.bin")
        #expect(url.absoluteString == "http://127.0.0.1:\(server.port)/dir/a%20b%25.bin")
        #expect(server.baseURL.absoluteString == "http://127.0.0.1:\(server.port)")

        let (data, response) = try await URLSession(configuration: .ephemeral).data(from: url)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(data == Data("spaced".utf8))
    }

    @Test func unknownAndRemovedPathsAre404() throws {
        let server = try LoopbackServer()
        server.serve("/gone", data: Data("x".utf8))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/nothing")
        #expect(try client.readResponse().status == 404)
        try client.request("GET", "/gone")
        #expect(try client.readResponse().status == 200)
        server.remove("/gone")
        try client.request("GET", "/gone")
        #expect(try client.readResponse().status == 404)
    }

    @Test func missingFileIs404() throws {
        let server = try LoopbackServer()
        server.serve("/file", file: URL(fileURLWithPath: "/nonexistent/\(UUID().uuidString)"))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/file")
        #expect(try client.readResponse().status == 404)
    }
}
