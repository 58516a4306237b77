import Foundation
import Testing
@testable import LoopbackServer

/// Resumable uploads (draft interop versions 3, 5 and 6): creation with 104, offset
/// retrieval, appends, conflicts, cancellation, OPTIONS, and the faults that make a
/// client resume. Raw sockets throughout, since 104 is informational and clients hide it.
@Suite(.timeLimit(.minutes(20)))
struct ResumableUploadTests {
    /// Creation or append header lines saying whether the request completes the upload.
    static func completeness(_ complete: Bool, version: Int) -> String {
        version >= 5 ? "Upload-Complete: \(complete ? "?1" : "?0")" : "Upload-Incomplete: \(complete ? "?0" : "?1")"
    }

    static func resumePath(_ location: String?) -> String? {
        location.flatMap { URL(string: $0)?.path }
    }

    /// Header lines of a PATCH appending from `offset`.
    static func appendHeaders(version: Int, offset: Int, length: Int, complete: Bool = true) -> [String] {
        var lines = ["Upload-Draft-Interop-Version: \(version)", "Upload-Offset: \(offset)",
                     "Content-Length: \(length)", completeness(complete, version: version)]
        if version >= 6 { lines.append("Content-Type: application/partial-upload") }
        return lines
    }

    @Test(arguments: [3, 5, 6])
    func creationAnnouncesResumptionAndCompletes(version: Int) throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [3, 5, 6]))
        let body = testBytes(1024 * 1024 + 321, seed: UInt64(version))

        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: \(version)",
                                          Self.completeness(true, version: version),
                                          "Content-Length: \(body.count)"])
        let interim = try client.readResponse()
        #expect(interim.status == 104)
        #expect(interim.header("Upload-Draft-Interop-Version") == String(version))
        let location = try #require(interim.header("Location"))
        #expect(location.hasPrefix(server.baseURL.absoluteString + "/.uploads/"))

        try client.send(body)
        let final = try client.readResponse()
        #expect(final.status == 201)
        #expect(final.header("Location") == location)
        #expect(final.header("Upload-Offset") == String(body.count))
        #expect(final.header("Upload-Draft-Interop-Version") == String(version))
        if version >= 5 {
            #expect(final.header("Upload-Complete") == "?1")
        } else {
            #expect(final.header("Upload-Incomplete") == "?0")
        }
        #expect(UploadAnswer(final.body) == UploadAnswer(bytes: Int64(body.count), sha256: sha256Hex(body)))

        let upload = try #require(server.receivedUploads(at: "/up").first)
        #expect(upload.resumable)
        #expect(upload.resumeURL?.absoluteString == location)
        #expect(upload.requestCount == 1)

        // Each upload gets its own resume path.
        try client.request("POST", "/up", ["Upload-Draft-Interop-Version: \(version)",
                                           Self.completeness(true, version: version), "Content-Length: 0"])
        let second = try client.readResponse()
        #expect(second.status == 104)
        #expect(second.header("Location") != location)
        #expect(try client.readResponse().status == 200)
    }

    @Test(arguments: [3, 5, 6])
    func droppedCreationResumesFromTheOffset(version: Int) throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        let cut: Int64 = 3 * 1024 * 1024 + 7
        server.acceptUploads(at: "/up", options: UploadOptions(storage: .file(directory: directory.url),
                                                               resumable: [version], dropAfterBytes: cut))
        let body = Payload.body

        let first = try RawHTTPClient(port: server.port)
        try first.request("PUT", "/up", ["Upload-Draft-Interop-Version: \(version)",
                                         Self.completeness(true, version: version),
                                         "Content-Length: \(body.count)"])
        let interim = try first.readResponse()
        #expect(interim.status == 104)
        let path = try #require(Self.resumePath(interim.header("Location")))
        try? first.send(body)  // cut off after `cut` bytes
        #expect(try first.readUntilClose().isEmpty, "closed without a final answer")
        #expect(server.uploadBytesReceived == cut)

        let second = try RawHTTPClient(port: server.port)
        try second.request("HEAD", path, ["Upload-Draft-Interop-Version: \(version)"])
        let head = try second.readResponse(forHead: true)
        #expect(head.status == 204)
        #expect(head.header("Upload-Offset") == String(cut))
        #expect(head.header("Cache-Control") == "no-store")
        if version >= 5 {
            #expect(head.header("Upload-Complete") == "?0")
        } else {
            #expect(head.header("Upload-Incomplete") == "?1")
        }

        let rest = body.subdata(in: Int(cut)..<body.count)
        try second.request("PATCH", path, Self.appendHeaders(version: version, offset: Int(cut), length: rest.count))
        try second.send(rest)
        let final = try second.readResponse()
        #expect(final.status == 201)
        #expect(final.header("Upload-Offset") == String(body.count))
        #expect(UploadAnswer(final.body) == UploadAnswer(bytes: Int64(body.count), sha256: Payload.sha256))
        // Every byte was sent exactly once.
        #expect(server.uploadBytesReceived == Int64(body.count))

        let upload = try #require(server.receivedUploads(at: "/up").first)
        #expect(upload.requestCount == 2)
        #expect(upload.method == "PUT")
        let file = try #require(upload.file)
        #expect(try Data(contentsOf: file) == body)

        // Now complete: HEAD says so, another PATCH conflicts.
        try second.request("HEAD", path, ["Upload-Draft-Interop-Version: \(version)"])
        #expect(try second.readResponse(forHead: true).header("Upload-Offset") == String(body.count))
        try second.request("PATCH", path, Self.appendHeaders(version: version, offset: body.count, length: 1))
        try second.send("x")
        let late = try second.readResponse()
        #expect(late.status == 409)
        #expect(late.header(version >= 5 ? "Upload-Complete" : "Upload-Incomplete") == (version >= 5 ? "?1" : "?0"))
    }

    @Test func incompleteCreationThenAppends() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6]))
        let body = testBytes(300_000, seed: 2)
        let client = try RawHTTPClient(port: server.port)
        try client.request("POST", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?0",
                                           "Content-Length: 100000"])
        let interim = try client.readResponse()
        let path = try #require(Self.resumePath(interim.header("Location")))
        try client.send(body.prefix(100_000))
        let created = try client.readResponse()
        #expect(created.status == 201)
        #expect(created.header("Upload-Complete") == "?0")
        #expect(created.header("Upload-Offset") == "100000")
        #expect(created.header("Location") == interim.header("Location"))
        #expect(server.receivedUploads(at: "/up").isEmpty)

        // An incomplete append, then a chunked one that completes it.
        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 100_000, length: 50_000, complete: false))
        try client.send(body.subdata(in: 100_000..<150_000))
        let middle = try client.readResponse()
        #expect(middle.status == 201)
        #expect(middle.header("Upload-Offset") == "150000")
        #expect(middle.header("Location") == nil)

        try client.request("PATCH", path, ["Upload-Draft-Interop-Version: 6", "Upload-Offset: 150000",
                                           "Content-Type: application/partial-upload", "Transfer-Encoding: chunked"])
        try client.sendChunked(body.subdata(in: 150_000..<body.count), pieces: [4096, 70_000])
        let final = try client.readResponse()
        #expect(final.status == 200, "a POST's final status")
        #expect(final.header("Upload-Complete") == "?1")
        #expect(UploadAnswer(final.body) == UploadAnswer(bytes: 300_000, sha256: sha256Hex(body)))
        #expect(server.receivedUploads(at: "/up").first?.requestCount == 3)
    }

    @Test func wrongOffsetConflicts() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [5]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: 5", "Upload-Complete: ?0", "Content-Length: 10"])
        let path = try #require(Self.resumePath(try client.readResponse().header("Location")))
        try client.send("0123456789")
        #expect(try client.readResponse().status == 201)

        for wrong in [0, 5, 11] {
            try client.request("PATCH", path, Self.appendHeaders(version: 5, offset: wrong, length: 3))
            try client.send("abc")
            let conflict = try client.readResponse()
            #expect(conflict.status == 409)
            #expect(conflict.header("Upload-Offset") == "10")
            #expect(conflict.header("Upload-Complete") == "?0")
            #expect(conflict.header("Content-Length") == "0")
        }
        // The connection survived the conflicts and the upload is intact.
        try client.request("PATCH", path, Self.appendHeaders(version: 5, offset: 10, length: 3))
        try client.send("abc")
        let final = try client.readResponse()
        #expect(final.status == 201)
        #expect(UploadAnswer(final.body)?.sha256 == sha256Hex(Data("0123456789abc".utf8)))
    }

    @Test func conflictOnceMakesTheClientAskAgain() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6], conflictOnce: true))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?0", "Content-Length: 4"])
        let path = try #require(Self.resumePath(try client.readResponse().header("Location")))
        try client.send("abcd")
        #expect(try client.readResponse().status == 201)

        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 4, length: 2))
        try client.send("ef")
        let conflict = try client.readResponse()
        #expect(conflict.status == 409)
        #expect(conflict.header("Upload-Offset") == "4")

        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 4, length: 2))
        try client.send("ef")
        #expect(try client.readResponse().status == 201)
        #expect(server.receivedUploads(at: "/up").first?.sha256 == sha256Hex(Data("abcdef".utf8)))
    }

    @Test func badRequests() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [3, 6]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?0", "Content-Length: 0"])
        let path = try #require(Self.resumePath(try client.readResponse().header("Location")))
        #expect(try client.readResponse().status == 201)

        func status(_ method: String, _ target: String, _ lines: [String], body: String = "") throws -> RawResponse {
            let length = lines.contains { $0.hasPrefix("Content-Length") } ? [] : ["Content-Length: \(body.utf8.count)"]
            try client.request(method, target, lines + length)
            try client.send(body)
            return try client.readResponse(forHead: method == "HEAD")
        }
        // v6 PATCH without application/partial-upload.
        let noType = try status("PATCH", path, ["Upload-Draft-Interop-Version: 6", "Upload-Offset: 0"], body: "x")
        #expect(noType.status == 400)
        #expect(noType.header("Upload-Draft-Interop-Version") == "6")
        // PATCH without Upload-Offset.
        #expect(try status("PATCH", path, ["Upload-Draft-Interop-Version: 3", "Upload-Incomplete: ?0"], body: "x").status == 400)
        // A version the route does not speak, and one nobody speaks.
        #expect(try status("PUT", "/up", ["Upload-Draft-Interop-Version: 5", "Upload-Complete: ?1"]).status == 400)
        #expect(try status("HEAD", path, ["Upload-Draft-Interop-Version: 4"]).status == 400)
        // Creation with a nonzero offset; HEAD with extra fields; GET on a resume path.
        #expect(try status("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1", "Upload-Offset: 5"]).status == 400)
        #expect(try status("HEAD", path, ["Upload-Draft-Interop-Version: 6", "Upload-Offset: 0"]).status == 400)
        #expect(try status("GET", path, ["Upload-Draft-Interop-Version: 6"]).status == 400)
        // Unknown resume paths.
        #expect(try status("HEAD", "/.uploads/nope", ["Upload-Draft-Interop-Version: 6"]).status == 404)
        #expect(try status("PATCH", "/.uploads/nope", Self.appendHeaders(version: 6, offset: 0, length: 0)).status == 404)
        // The upload is untouched.
        #expect(try status("HEAD", path, ["Upload-Draft-Interop-Version: 6"]).header("Upload-Offset") == "0")
    }

    @Test func cancellationForgetsTheUpload() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(storage: .file(directory: directory.url), resumable: [5]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: 5", "Upload-Complete: ?0", "Content-Length: 3"])
        let path = try #require(Self.resumePath(try client.readResponse().header("Location")))
        try client.send("abc")
        #expect(try client.readResponse().status == 201)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).count == 1)

        try client.request("DELETE", path, ["Upload-Draft-Interop-Version: 5"])
        let deleted = try client.readResponse()
        #expect(deleted.status == 204)
        #expect(deleted.header("Upload-Draft-Interop-Version") == "5")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).isEmpty, "partial file removed")

        try client.request("HEAD", path, ["Upload-Draft-Interop-Version: 5"])
        #expect(try client.readResponse(forHead: true).status == 404)
        try client.request("DELETE", path, ["Upload-Draft-Interop-Version: 5"])
        #expect(try client.readResponse().status == 404)
        #expect(server.requests.map(\.method) == ["PUT", "DELETE", "HEAD", "DELETE"])
    }

    @Test func optionsAdvertisesTheLimit() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [3, 5, 6]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("OPTIONS", "/up", ["Upload-Draft-Interop-Version: 5"])
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.header("Upload-Draft-Interop-Version") == "5")
        #expect(response.header("Upload-Limit") == "min-size=0")
        // Without the version header OPTIONS is just not allowed.
        try client.request("OPTIONS", "/up")
        let plain = try client.readResponse()
        #expect(plain.status == 405)
        #expect(plain.header("Allow") == "PUT, POST, OPTIONS")
    }

    @Test func plainRouteIgnoresTheDraftHeaders() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/plain")
        server.acceptUploads(at: "/resumable", options: UploadOptions(resumable: [6]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/plain", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1", "Content-Length: 5"])
        try client.send("hello")
        let response = try client.readResponse()
        #expect(response.status == 201, "the final answer, no 104")
        #expect(response.header("Upload-Offset") == nil)
        #expect(response.header("Location") == nil)
        // A resumable route without the completeness header: a plain upload too.
        try client.request("PUT", "/resumable", ["Upload-Draft-Interop-Version: 6", "Content-Length: 5"])
        try client.send("hello")
        #expect(try client.readResponse().status == 201)
        #expect(server.receivedUploads(at: "/resumable").first?.resumable == false)
        #expect(server.uploadBytesReceived == 10)
    }

    @Test func expectContinueGets104Then100() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1",
                                          "Content-Length: 5", "Expect: 100-continue"])
        #expect(try client.readResponse().status == 104)
        #expect(try client.readResponse().status == 100)
        try client.send("hello")
        #expect(try client.readResponse().status == 201)
    }

    /// An offset query while another connection is still sending takes the upload over, as
    /// the reference server does: that connection is closed and the offset is final.
    @Test func offsetQueryTakesOverFromAStalledConnection() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6]))
        let body = testBytes(200_000, seed: 8)
        let stalled = try RawHTTPClient(port: server.port)
        try stalled.request("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1",
                                           "Content-Length: \(body.count)"])
        let path = try #require(Self.resumePath(try stalled.readResponse().header("Location")))
        try stalled.send(body.prefix(50_000))  // and then nothing more

        let other = try RawHTTPClient(port: server.port)
        try other.request("HEAD", path, ["Upload-Draft-Interop-Version: 6"])
        let head = try other.readResponse(forHead: true)
        #expect(head.status == 204)
        let offset = try #require(head.header("Upload-Offset").flatMap(Int.init))
        #expect(offset <= 50_000)
        #expect(try stalled.readUntilClose().isEmpty, "the stalled connection was closed")

        try other.request("PATCH", path, Self.appendHeaders(version: 6, offset: offset, length: body.count - offset))
        try other.send(body.subdata(in: offset..<body.count))
        let final = try other.readResponse()
        #expect(final.status == 201)
        #expect(UploadAnswer(final.body)?.sha256 == sha256Hex(body))
    }

    @Test func newOptionsKeepUploadsInProgress() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6], dropAfterBytes: 1000))
        let body = testBytes(5000)
        let first = try RawHTTPClient(port: server.port)
        try first.request("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1", "Content-Length: 5000"])
        let path = try #require(Self.resumePath(try first.readResponse().header("Location")))
        try? first.send(body)
        #expect(try first.readUntilClose().isEmpty)

        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6], status: 500))
        let client = try RawHTTPClient(port: server.port)
        try client.request("HEAD", path, ["Upload-Draft-Interop-Version: 6"])
        #expect(try client.readResponse(forHead: true).header("Upload-Offset") == "1000")
        // The status fault now answers appends (after reading them) without taking the bytes.
        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 1000, length: 4000))
        try client.send(body.subdata(in: 1000..<5000))
        #expect(try client.readResponse().status == 500)

        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6]))
        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 1000, length: 4000))
        try client.send(body.subdata(in: 1000..<5000))
        let final = try client.readResponse()
        #expect(final.status == 201)
        #expect(UploadAnswer(final.body)?.sha256 == sha256Hex(body))
        #expect(server.uploadBytesReceived == 1000 + 4000 + 4000)
    }

    @Test func uploadLengthMustAgree() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [6]))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?0",
                                          "Upload-Length: 6", "Content-Length: 2"])
        let path = try #require(Self.resumePath(try client.readResponse().header("Location")))
        try client.send("ab")
        #expect(try client.readResponse().status == 201)
        // Ending the upload at 2 + 3 contradicts the announced 6.
        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 2, length: 3))
        try client.send("cde")
        #expect(try client.readResponse().status == 409)
        try client.request("PATCH", path, Self.appendHeaders(version: 6, offset: 2, length: 4))
        try client.send("cdef")
        #expect(try client.readResponse().status == 201)
    }

    @Test(.enabled(if: curlAvailable)) func curlHandles104AndExpectContinue() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up", options: UploadOptions(resumable: [3, 5, 6]))
        // Over 1 MiB, so curl sends Expect: 100-continue on its own.
        let body = testBytes(3 * 1024 * 1024, seed: 12)
        let file = directory.file("body.bin")
        try body.write(to: file)

        let url = server.url(for: "/up").absoluteString
        let expected = UploadAnswer(bytes: Int64(body.count), sha256: sha256Hex(body))

        let run = try runCurl(["-sS", "-v", "-T", file.path, "-H", "Upload-Draft-Interop-Version: 6",
                               "-H", "Upload-Complete: ?1", url], in: directory)
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(run.stderr.contains("Expect: 100-continue"))
        #expect(run.stderr.contains("< HTTP/1.1 104 Upload Resumption Supported"))
        #expect(run.stderr.contains("< HTTP/1.1 100 Continue"))
        #expect(run.stderr.contains("< HTTP/1.1 201 Created"))
        #expect(UploadAnswer(Array(run.stdout.utf8)) == expected)

        // Without Expect the 104 arrives while curl is already sending; v3, chunked.
        let chunked = try runCurl(["-sS", "-v", "-T", file.path, "-H", "Expect:", "-H", "Transfer-Encoding: chunked",
                                   "-H", "Upload-Draft-Interop-Version: 3", "-H", "Upload-Incomplete: ?0", url],
                                  in: directory)
        #expect(chunked.exitCode == 0, "\(chunked.stderr)")
        #expect(!chunked.stderr.contains("Expect: 100-continue"))
        #expect(chunked.stderr.contains("< HTTP/1.1 104 Upload Resumption Supported"))
        #expect(chunked.stderr.contains("< Upload-Incomplete: ?0"))
        #expect(UploadAnswer(Array(chunked.stdout.utf8)) == expected)
        #expect(server.receivedUploads(at: "/up").map(\.resumable) == [true, true])
    }
}
