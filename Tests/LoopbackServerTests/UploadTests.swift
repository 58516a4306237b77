import Foundation
import Testing
@testable import LoopbackServer

/// Plain upload routes: PUT and POST bodies (Content-Length and chunked), storage kinds,
/// the answer's JSON, received-upload records and the route's faults.
@Suite(.timeLimit(.minutes(20)))
struct UploadTests {
    @Test(arguments: ["PUT", "POST"], [false, true])
    func uploadIsCountedAndHashed(method: String, chunked: Bool) throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up")
        let body = Payload.body

        let client = try RawHTTPClient(port: server.port)
        if chunked {
            try client.request(method, "/up", ["Transfer-Encoding: chunked", "X-Test: yes"])
            try client.sendChunked(body, pieces: [1, 1000, 1 << 20, 300_001])
        } else {
            try client.request(method, "/up", ["Content-Length: \(body.count)", "X-Test: yes"])
            try client.send(body)
        }
        let response = try client.readResponse()
        #expect(response.status == (method == "PUT" ? 201 : 200))
        #expect(response.header("Content-Type") == "application/json")
        #expect(UploadAnswer(response.body) == UploadAnswer(bytes: Int64(body.count), sha256: Payload.sha256))

        let received = server.receivedUploads(at: "/up")
        #expect(received.count == 1)
        #expect(received.first?.method == method)
        #expect(received.first?.path == "/up")
        #expect(received.first?.byteCount == Int64(body.count))
        #expect(received.first?.sha256 == Payload.sha256)
        #expect(received.first?.file == nil)
        #expect(received.first?.resumable == false)
        #expect(received.first?.header("X-Test") == "yes")
        #expect(server.uploadBytesReceived == Int64(body.count))
        #expect(server.requests.last?.bodyLength == Int64(body.count))

        // The connection stays in step for the next request.
        try client.request(method, "/up", ["Content-Length: 3"])
        try client.send("abc")
        #expect(UploadAnswer(try client.readResponse().body)?.bytes == 3)
        #expect(server.waitForUploads(at: "/up", count: 2, timeout: 5))
    }

    @Test func fileStorageWritesTheBody() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/store", options: UploadOptions(storage: .file(directory: directory.url)))
        let body = testBytes(3 * 1024 * 1024 + 5, seed: 3)

        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/store", ["Content-Length: \(body.count)"])
        try client.send(body)
        let response = try client.readResponse()
        #expect(response.status == 201)
        let upload = try #require(server.receivedUploads(at: "/store").first)
        let file = try #require(upload.file)
        #expect(file.deletingLastPathComponent().standardizedFileURL == directory.url.standardizedFileURL)
        #expect(try Data(contentsOf: file) == body)
        #expect(upload.sha256 == sha256Hex(body))
    }

    @Test func countOnlyOmitsTheHashAndResponseStatusIsUsed() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/count", options: UploadOptions(storage: .countOnly, responseStatus: 202))
        let client = try RawHTTPClient(port: server.port)
        try client.request("POST", "/count", ["Content-Length: 10"])
        try client.send("0123456789")
        let response = try client.readResponse()
        #expect(response.status == 202)
        #expect(String(decoding: response.body, as: UTF8.self) == "{\"bytes\":10}")
        #expect(server.receivedUploads(at: "/count").first?.sha256 == nil)
    }

    @Test func otherMethodsGet405() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/only")
        server.acceptUploads(at: "/both")
        server.serve("/both", data: Data("content".utf8))

        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/only")
        let get = try client.readResponse()
        #expect(get.status == 405)
        #expect(get.header("Allow") == "PUT, POST")
        try client.request("DELETE", "/only")
        #expect(try client.readResponse().status == 405)

        // A path that also serves content still serves it, and says so in Allow.
        try client.request("GET", "/both")
        #expect(try client.readResponse().data == Data("content".utf8))
        try client.request("PATCH", "/both", ["Content-Length: 2"])
        try client.send("xy")
        let patch = try client.readResponse()
        #expect(patch.status == 405)
        #expect(patch.header("Allow") == "GET, HEAD, PUT, POST")
        try client.request("PUT", "/both", ["Content-Length: 2"])
        try client.send("xy")
        #expect(try client.readResponse().status == 201)
        #expect(server.receivedUploads(at: "/only").isEmpty)
    }

    @Test func expectContinueGetsContinueBeforeTheBody() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up")
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Content-Length: 5", "Expect: 100-continue"])
        #expect(try client.readResponse().status == 100)
        try client.send("hello")
        let response = try client.readResponse()
        #expect(response.status == 201)
        #expect(UploadAnswer(response.body) == UploadAnswer(bytes: 5, sha256: sha256Hex(Data("hello".utf8))))
    }

    @Test func dropAfterBytesCutsTheFirstUploadOnly() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/drop", options: UploadOptions(dropAfterBytes: 100_000))
        let body = testBytes(1_000_000, seed: 5)

        let first = try RawHTTPClient(port: server.port)
        try first.request("PUT", "/drop", ["Content-Length: \(body.count)"])
        try? first.send(body)  // the server stops reading part-way
        #expect(try first.readUntilClose().isEmpty, "closed without an answer")
        #expect(server.uploadBytesReceived == 100_000)
        #expect(server.receivedUploads(at: "/drop").isEmpty)
        #expect(server.requests.last?.bodyLength == 100_000)

        // One-shot: the next upload goes through.
        let second = try RawHTTPClient(port: server.port)
        try second.request("PUT", "/drop", ["Content-Length: \(body.count)"])
        try second.send(body)
        #expect(UploadAnswer(try second.readResponse().body)?.sha256 == sha256Hex(body))
        #expect(server.uploadBytesReceived == 1_100_000)
    }

    @Test func dropEveryTimeInChunkedBodies() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/drop", options: UploadOptions(dropAfterBytes: 2500, dropOnce: false))
        let body = testBytes(10_000)
        for round in 1...2 {
            let client = try RawHTTPClient(port: server.port)
            try client.request("POST", "/drop", ["Transfer-Encoding: chunked"])
            try? client.sendChunked(body, pieces: [1000])
            #expect(try client.readUntilClose().isEmpty)
            #expect(server.uploadBytesReceived == Int64(2500 * round))
        }
        // A body no longer than the limit is not cut.
        let short = try RawHTTPClient(port: server.port)
        try short.request("POST", "/drop", ["Transfer-Encoding: chunked"])
        try short.sendChunked(body.prefix(2500), pieces: [2500])
        #expect(try short.readResponse().status == 200)
    }

    @Test func malformedChunkedUploadGets400() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up")
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/up", ["Transfer-Encoding: chunked"])
        try client.send("5\r\nhello\r\nzz\r\n")
        let response = try client.readResponse()
        #expect(response.status == 400)
        #expect(response.header("Connection") == "close")
        #expect(server.receivedUploads(at: "/up").isEmpty)
        #expect(server.uploadBytesReceived == 5)
    }

    @Test func statusFaultDrainsThenAnswers() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/busy", options: UploadOptions(status: 503, retryAfter: 3))
        let client = try RawHTTPClient(port: server.port)
        for _ in 1...2 {
            try client.request("PUT", "/busy", ["Content-Length: 50000"])
            try client.send(testBytes(50_000))
            let response = try client.readResponse()
            #expect(response.status == 503)
            #expect(response.header("Retry-After") == "3")
        }
        #expect(server.receivedUploads(at: "/busy").isEmpty)
        #expect(server.uploadBytesReceived == 100_000)

        // Replacing the options takes effect at once.
        server.acceptUploads(at: "/busy")
        try client.request("PUT", "/busy", ["Content-Length: 1"])
        try client.send("x")
        #expect(try client.readResponse().status == 201)
    }

    @Test func throttledUploadTakesItsTime() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/slow", options: UploadOptions(bytesPerSecond: 200_000))
        let body = testBytes(60_000)
        let client = try RawHTTPClient(port: server.port)
        let started = Date()
        try client.request("PUT", "/slow", ["Content-Length: \(body.count)"])
        try client.send(body)
        let response = try client.readResponse()
        // 60 000 bytes at 200 000 B/s cannot be read in much under 0.3 s.
        #expect(Date().timeIntervalSince(started) >= 0.25)
        #expect(UploadAnswer(response.body)?.sha256 == sha256Hex(body))
    }

    @Test(.enabled(if: curlAvailable)) func curlPutAndPost() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/up")
        let body = testBytes(2 * 1024 * 1024 + 1, seed: 9)
        let file = directory.file("body.bin")
        try body.write(to: file)
        let url = server.url(for: "/up").absoluteString

        let put = try runCurl(["-sS", "-T", file.path, url], in: directory)
        #expect(put.exitCode == 0, "\(put.stderr)")
        #expect(UploadAnswer(Array(put.stdout.utf8)) == UploadAnswer(bytes: Int64(body.count), sha256: sha256Hex(body)))

        let post = try runCurl(["-sS", "--data-binary", "@" + file.path, "-H", "Transfer-Encoding: chunked", url], in: directory)
        #expect(post.exitCode == 0, "\(post.stderr)")
        #expect(UploadAnswer(Array(post.stdout.utf8)) == UploadAnswer(bytes: Int64(body.count), sha256: sha256Hex(body)))
        #expect(server.receivedUploads(at: "/up").map(\.method) == ["PUT", "POST"])
    }

    /// The benchmark's path: curl -T into a count-only route. Prints the rate; the test only
    /// checks that every byte arrived.
    @Test(.enabled(if: curlAvailable)) func curlPutThroughputToCountOnly() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/sink", options: UploadOptions(storage: .countOnly))
        let size = 256 * 1024 * 1024
        let file = directory.file("big.bin")
        let block = testBytes(1 << 20, seed: 11)
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        for _ in 0..<(size >> 20) { try handle.write(contentsOf: block) }
        try handle.close()

        let run = try runCurl(["-sS", "-T", file.path, "-o", "/dev/null",
                               "-w", "%{http_code} %{size_upload} %{speed_upload} %{time_total}",
                               server.url(for: "/sink").absoluteString], in: directory, timeout: 60)
        #expect(run.exitCode == 0, "\(run.stderr)")
        let fields = run.stdout.split(separator: " ")
        #expect(fields.first == "201")
        #expect(server.receivedUploads(at: "/sink").first?.byteCount == Int64(size))
        if fields.count == 4, let speed = Double(fields[2]), let seconds = Double(fields[3]) {
            print("curl -T 256 MiB to a .countOnly route: \(String(format: "%.0f", speed / 1e6)) MB/s (\(String(format: "%.2f", seconds)) s)")
        }
    }
}
