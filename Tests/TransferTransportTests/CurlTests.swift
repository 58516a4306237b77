import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif
import TestPeers
import TransferContainer
import TransferPOSIX
@testable import TransferTransport

/// Tests of the libcurl layer (CurlEasy, CurlMulti, CurlError) against a tiny HTTP server on
/// 127.0.0.1 defined below. Every wait has a deadline; no traffic leaves the loopback interface.
final class CurlTests: XCTestCase {

    // MARK: - Requests and responses

    func testGETThroughMultiCollectsStatusHeadersAndBody() throws {
        let body = patternBytes(count: 300_000)
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK",
                               headers: ["Content-Type: application/octet-stream", "X-Test: yes"],
                               body: body)
        }
        defer { server.stop() }

        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/file.bin"))
        try easy.setHeaders(["X-Client: abc", "X-Empty: "])
        var headerLines: [String] = []
        var received: [UInt8] = []
        easy.onHeaderLine = { headerLines.append($0) }
        easy.onBody = { bytes in
            received.append(contentsOf: bytes)
            return .consumed
        }
        try multi.add(easy)
        let completions = try drive(multi)

        XCTAssertEqual(completions.count, 1)
        XCTAssertTrue(completions.first?.0 === easy)
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertEqual(easy.responseCode, 200)
        XCTAssertEqual(received.count, body.count)
        XCTAssertTrue(received == body)
        XCTAssertEqual(headerLines.first, "HTTP/1.1 200 OK")
        XCTAssertTrue(headerLines.contains("X-Test: yes"))
        XCTAssertTrue(headerLines.contains("Content-Length: \(body.count)"))
        XCTAssertEqual(headerLines.last, "", "the empty line ending the header block is reported")
        XCTAssertEqual(easy.contentLengthDownload, Int64(body.count))
        XCTAssertEqual(easy.contentType, "application/octet-stream")
        XCTAssertEqual(easy.effectiveURL, server.url("/file.bin"))
        XCTAssertEqual(easy.bytesReceived, Int64(body.count))
        XCTAssertEqual(easy.primaryIP, "127.0.0.1")
        XCTAssertEqual(easy.primaryPort, Int(server.port))
        XCTAssertEqual(multi.transferCount, 0, "a completion is removed from the multi")

        let request = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(request.method, "GET")
        XCTAssertEqual(request.target, "/file.bin")
        XCTAssertEqual(request.header("x-client"), "abc")
        XCTAssertEqual(request.header("x-empty"), "", "an empty value is sent, not dropped")
        XCTAssertNil(request.header("expect"))
        XCTAssertNil(request.header("accept-encoding"), "libcurl must not ask for compression")
    }

    func testHEADReadsNoBody() throws {
        let server = try CurlTestServer { request, connection in
            // A HEAD response announces a length but carries no body.
            connection.send("HTTP/1.1 200 OK\r\nContent-Length: 12345\r\nConnection: close\r\n\r\n")
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/head"))
        easy.setMethod("HEAD")
        var bodyCalls = 0
        easy.onBody = { _ in bodyCalls += 1; return .consumed }
        try multi.add(easy)
        let completions = try drive(multi)
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertEqual(easy.responseCode, 200)
        XCTAssertEqual(easy.contentLengthDownload, 12345)
        XCTAssertEqual(bodyCalls, 0)
        XCTAssertEqual(server.requests.first?.method, "HEAD")
    }

    func testRangeIsSentAndA200AnswerIsNotAnError() throws {
        let body = patternBytes(count: 1000)
        let server = try CurlTestServer { _, connection in
            // Ignores the range, as a server does when If-Range no longer matches.
            connection.respond(status: "200 OK", headers: [], body: body)
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/resume"))
        try easy.setHeaders(["If-Range: \"v1\""])
        easy.setRange(from: 100)
        var received: [UInt8] = []
        easy.onBody = { received.append(contentsOf: $0); return .consumed }
        try multi.add(easy)
        let completions = try drive(multi)
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertEqual(easy.responseCode, 200)
        XCTAssertTrue(received == body)
        XCTAssertEqual(server.requests.first?.header("range"), "bytes=100-")
        XCTAssertEqual(server.requests.first?.header("if-range"), "\"v1\"")
    }

    func testRedirectIsFollowedAndBothHeaderBlocksAreReported() throws {
        let server = try CurlTestServer { request, connection in
            if request.target == "/start" {
                connection.respond(status: "302 Found", headers: ["Location: /final"], body: [])
            } else {
                connection.respond(status: "200 OK", headers: [], body: Array("done".utf8))
            }
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/start"))
        easy.setFollowsRedirects(true, maximum: 5)
        var statusLines: [String] = []
        var received: [UInt8] = []
        easy.onHeaderLine = { if $0.hasPrefix("HTTP/") { statusLines.append($0) } }
        easy.onBody = { received.append(contentsOf: $0); return .consumed }
        try multi.add(easy)
        let completions = try drive(multi)
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertEqual(statusLines, ["HTTP/1.1 302 Found", "HTTP/1.1 200 OK"])
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "done")
        XCTAssertEqual(easy.redirectCount, 1)
        XCTAssertEqual(easy.effectiveURL, server.url("/final"))
    }

    func testOnlyHTTPAndHTTPSAreAllowedAlsoForRedirects() throws {
        let easy = try CurlEasy()
        XCTAssertThrowsError(try easy.setURL("file:///etc/passwd")) { error in
            XCTAssertEqual((error as? CurlError)?.kind, .unsupportedProtocol)
        }
        XCTAssertThrowsError(try easy.setURL("ftp://127.0.0.1/x")) { error in
            XCTAssertEqual((error as? CurlError)?.kind, .unsupportedProtocol)
        }
        XCTAssertThrowsError(try easy.setURL("http://[::1")) { error in
            XCTAssertEqual((error as? CurlError)?.kind, .badURL)
        }
        XCTAssertThrowsError(try easy.setHeaders(["X-Evil: a\r\nX-Injected: b"]))

        let server = try CurlTestServer { _, connection in
            connection.respond(status: "302 Found", headers: ["Location: file:///etc/passwd"], body: [])
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        try easy.setURL(server.url("/sneaky"))
        easy.setFollowsRedirects(true, maximum: 5)
        var received: [UInt8] = []
        easy.onBody = { received.append(contentsOf: $0); return .consumed }
        try multi.add(easy)
        let completions = try drive(multi)
        XCTAssertEqual(failureKind(completions.first?.1), .unsupportedProtocol)
        XCTAssertTrue(received.isEmpty)
    }

    func testTooManyRedirects() throws {
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "302 Found", headers: ["Location: /again"], body: [])
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/loop"))
        easy.setFollowsRedirects(true, maximum: 3)
        try multi.add(easy)
        let completions = try drive(multi)
        XCTAssertEqual(failureKind(completions.first?.1), .tooManyRedirects)
    }

    func testSeveralTransfersShareOneMultiUnderConnectionLimits() throws {
        let server = try CurlTestServer { request, connection in
            connection.respond(status: "200 OK", headers: [], body: Array(request.target.utf8))
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        multi.setMaximumConnections(total: 2, perHost: 1)
        var bodies: [ObjectIdentifier: [UInt8]] = [:]
        var easies: [CurlEasy] = []
        for index in 0..<6 {
            let easy = try CurlEasy()
            try easy.setURL(server.url("/item/\(index)"))
            let key = ObjectIdentifier(easy)
            easy.onBody = { bodies[key, default: []].append(contentsOf: $0); return .consumed }
            try multi.add(easy)
            easies.append(easy)
        }
        XCTAssertEqual(multi.transferCount, 6)
        let completions = try drive(multi)
        XCTAssertEqual(completions.count, 6)
        for (index, easy) in easies.enumerated() {
            XCTAssertTrue(completions.contains { $0.0 === easy })
            XCTAssertEqual(bodies[ObjectIdentifier(easy)].map { String(decoding: $0, as: UTF8.self) }, "/item/\(index)")
        }
        XCTAssertEqual(server.requests.count, 6)
    }

    func testAHandleCanBeReusedForAnotherRequest() throws {
        let server = try CurlTestServer { request, connection in
            connection.respond(status: "200 OK", headers: [], body: Array("\(request.method) \(request.body.count)".utf8))
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        var received: [UInt8] = []
        easy.onBody = { received.append(contentsOf: $0); return .consumed }
        try easy.setURL(server.url("/one"))
        easy.setMethod("PUT")
        easy.setUploadSize(3)
        var sent = false
        easy.onUploadRead = { buffer in
            if sent { return .bytes(0) }
            sent = true
            buffer.copyBytes(from: [1, 2, 3])
            return .bytes(3)
        }
        try multi.add(easy)
        XCTAssertNoThrow(try drive(multi).first?.1.get())
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "PUT 3")

        received = []
        try easy.setURL(server.url("/two"))
        easy.setMethod("GET")
        easy.onUploadRead = nil
        try multi.add(easy)
        XCTAssertNoThrow(try drive(multi).first?.1.get())
        XCTAssertEqual(String(decoding: received, as: UTF8.self), "GET 0")
        XCTAssertEqual(server.requests.map(\.method), ["PUT", "GET"])
    }

    // MARK: - Backpressure and aborts

    func testPauseFromOnBodyAndResumeLaterDeliversEveryByte() throws {
        let body = patternBytes(count: 3_000_000)
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: [], body: body)
        }
        defer { server.stop() }

        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/big"))
        easy.setBufferSize(16 * 1024)
        var received: [UInt8] = []
        var calls = 0
        var pauses = 0
        var paused = false
        var insideResume = false
        var calledWhilePaused = false
        easy.onBody = { bytes in
            if paused && !insideResume { calledWhilePaused = true }
            calls += 1
            if calls % 4 == 0 {
                // Take nothing: libcurl must offer these same bytes again after resume().
                pauses += 1
                paused = true
                return .pause
            }
            paused = false
            received.append(contentsOf: bytes)
            return .consumed
        }
        try multi.add(easy)
        var pollsWhilePaused = 0
        let completions = try drive(multi, deadline: .seconds(30)) {
            guard paused else { return }
            pollsWhilePaused += 1
            if pollsWhilePaused % 3 == 0 {  // stay paused across a few loop iterations
                insideResume = true
                easy.resume()
                insideResume = false
            }
        }
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertFalse(calledWhilePaused, "no body callback while paused, except inside resume()")
        XCTAssertGreaterThan(pauses, 10)
        XCTAssertEqual(received.count, body.count)
        XCTAssertTrue(received == body, "every byte once, in order, despite the pauses")
    }

    func testPausedTransferDoesNotTripTheLowSpeedLimit() throws {
        let body = patternBytes(count: 200_000)
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: [], body: body)
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/slowreader"))
        easy.setTimeouts(connect: 5, lowSpeedLimit: 1000, lowSpeedTime: 1)
        var received: [UInt8] = []
        var pausedAt: ContinuousClock.Instant?
        var pausedOnce = false
        easy.onBody = { bytes in
            if !pausedOnce {
                pausedOnce = true
                pausedAt = .now
                return .pause
            }
            received.append(contentsOf: bytes)
            return .consumed
        }
        try multi.add(easy)
        let completions = try drive(multi) {
            if let start = pausedAt, ContinuousClock.now - start > .milliseconds(2500) {
                pausedAt = nil
                easy.resume()
            }
        }
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertTrue(received == body)
    }

    func testStalledTransferTripsTheLowSpeedLimitAsTimedOut() throws {
        let clientGaveUp = DispatchSemaphore(value: 0)
        let server = try CurlTestServer { _, connection in
            // Headers and a little body, then silence (the same setup as above, minus the
            // pause) until the client has given up, at most 10 s.
            connection.send("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nstart")
            _ = clientGaveUp.wait(timeout: .now() + 10)
        }
        defer { clientGaveUp.signal(); server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/stall"))
        easy.setTimeouts(connect: 5, lowSpeedLimit: 1000, lowSpeedTime: 1)
        try multi.add(easy)
        let start = ContinuousClock.now
        XCTAssertEqual(failureKind(try drive(multi).first?.1), .timedOut)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))
    }

    func testAbortFromOnBodyEndsPromptlyAsAborted() throws {
        let server = try CurlTestServer { _, connection in
            connection.streamForever()
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/endless"))
        var calls = 0
        easy.onBody = { _ in
            calls += 1
            return calls < 3 ? .consumed : .abort
        }
        try multi.add(easy)
        let start = ContinuousClock.now
        let completions = try drive(multi, deadline: .seconds(10))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(2))
        XCTAssertEqual(calls, 3, "no body callback after the abort")
        XCTAssertEqual(failureKind(completions.first?.1), .aborted)
    }

    func testAbortInsideResumeDeliveryStillEndsTheTransfer() throws {
        let server = try CurlTestServer { _, connection in
            connection.streamForever()
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/endless"))
        var mode = CurlEasy.BodyDisposition.pause
        var needsResume = false
        easy.onBody = { _ in
            if mode == .pause { needsResume = true }
            return mode
        }
        try multi.add(easy)
        let completions = try drive(multi, deadline: .seconds(10)) {
            if needsResume {
                needsResume = false
                mode = .abort  // the bytes re-offered inside resume() are refused
                easy.resume()
            }
        }
        XCTAssertEqual(failureKind(completions.first?.1), .aborted)
    }

    func testProgressReturningFalseAborts() throws {
        let server = try CurlTestServer { _, connection in
            connection.streamForever()
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/endless"))
        var lastDownloaded: Int64 = 0
        easy.onProgress = { downloaded, _, _, _ in
            lastDownloaded = downloaded
            return downloaded < 100_000
        }
        try multi.add(easy)
        let completions = try drive(multi, deadline: .seconds(10))
        XCTAssertEqual(failureKind(completions.first?.1), .aborted)
        XCTAssertGreaterThanOrEqual(lastDownloaded, 100_000)
    }

    func testRemovingARunningTransferCancelsItWithoutACompletion() throws {
        let server = try CurlTestServer { _, connection in
            connection.streamForever()
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        weak var weakEasy: CurlEasy?
        do {
            let easy = try CurlEasy()
            weakEasy = easy
            try easy.setURL(server.url("/endless"))
            var bytes = 0
            easy.onBody = { bytes += $0.count; return .consumed }
            try multi.add(easy)
            let deadline = ContinuousClock.now + .seconds(10)
            while bytes < 50_000 && ContinuousClock.now < deadline {
                try multi.perform()
                var none: [CurlMulti.PollRequest] = []
                try multi.poll(extra: &none, timeout: .milliseconds(50))
            }
            XCTAssertGreaterThanOrEqual(bytes, 50_000)
            multi.remove(easy)
            multi.remove(easy)  // a second remove is harmless
            XCTAssertEqual(multi.transferCount, 0)
        }
        XCTAssertNil(weakEasy, "the handle is freed once removed and released")
        try multi.perform()
        XCTAssertNil(multi.nextCompletion())

        // The multi still works afterwards.
        let body = patternBytes(count: 10)
        let other = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: [], body: body)
        }
        defer { other.stop() }
        let easy = try CurlEasy()
        try easy.setURL(other.url("/after"))
        try multi.add(easy)
        XCTAssertNoThrow(try drive(multi).first?.1.get())
    }

    // MARK: - Failures

    func testConnectionRefusedMapsToCouldNotConnect() throws {
        // A socket bound but not listening: the port is ours, and connecting to it is refused.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let port = try bindLoopback(fd)
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL("http://127.0.0.1:\(port)/nothing")
        easy.setTimeouts(connect: 5, lowSpeedLimit: nil, lowSpeedTime: nil)
        try multi.add(easy)
        let completions = try drive(multi)
        guard case .failure(let error)? = completions.first?.1 else {
            return XCTFail("expected a failure, got \(String(describing: completions.first?.1))")
        }
        XCTAssertEqual(error.kind, .couldNotConnect)
        XCTAssertEqual(error.origin, .transfer)
        XCTAssertEqual(error.code, 7)
        XCTAssertTrue(error.message.contains("127.0.0.1"), "includes libcurl's detail: \(error.message)")
    }

    func testEmptyReplyMapsToConnectionLost() throws {
        let server = try CurlTestServer { _, _ in }  // closes without answering
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/silent"))
        try multi.add(easy)
        XCTAssertEqual(failureKind(try drive(multi).first?.1), .connectionLost)
    }

    func testShortBodyMapsToConnectionLost() throws {
        let server = try CurlTestServer { _, connection in
            connection.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly a little")
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/short"))
        try multi.add(easy)
        XCTAssertEqual(failureKind(try drive(multi).first?.1), .connectionLost)
    }

    // MARK: - Header limits (README "Limits")

    func testOneHugeResponseHeaderEndsWith1103AndIsNotRetried() throws {
        // A 1 MiB header line: libcurl refuses it ("Out of memory"), which was -1 before.
        let line = "X-Huge: " + String(repeating: "a", count: 1 << 20)
        try assertHeaderLimitFailure(headers: [line])
    }

    func testTenThousandResponseHeadersEndWith1103AndAreNotRetried() throws {
        // Small lines, many of them: they were taken as network trouble and retried for ever.
        let lines = (0..<10_000).map { "X-Header-\($0): \(String(repeating: "v", count: 40))" }
        try assertHeaderLimitFailure(headers: lines)
    }

    func testExactlyTheLineLimitIsAcceptedAndOneLineMoreIsRefused() throws {
        // 1,000 counted lines: the status line, the headers below, Content-Length, Connection
        // and the blank line that ends the block (four lines the server adds). Lines of 20 bytes keep
        // the block near 20 KB, far under the 256 KiB byte bound, so only the line bound acts.
        let atTheLimit = TransferLimits.responseHeaderLines - 4
        let lines = (0..<atTheLimit + 1).map { String(format: "X-H-%05d: vvvvvvvv", $0) }
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: Array(lines.prefix(atTheLimit)), body: Array("body".utf8))
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/at-the-limit"))
        try multi.add(easy)
        guard case .success? = try drive(multi).first?.1 else {
            return XCTFail("a block of exactly \(TransferLimits.responseHeaderLines) lines is within the bound")
        }
        XCTAssertEqual(easy.responseCode, 200)
        try assertHeaderLimitFailure(headers: lines)
    }

    /// One exchange with a server answering `headers`: it fails with -1103, the retry policy
    /// ends the task at once, and the server saw one request.
    private func assertHeaderLimitFailure(headers: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: headers, body: Array("body".utf8))
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/headers"))
        try multi.add(easy)
        guard case .failure(let error)? = try drive(multi).first?.1 else {
            return XCTFail("expected a failure", file: file, line: line)
        }
        XCTAssertEqual(error.urlErrorCode, -1103, "\(error)", file: file, line: line)
        let decision = RetryPolicy().afterTransportFailure(code: error.urlErrorCode, retry: 1, createdAt: Date(),
                                                           resourceTimeout: 3600, now: Date())
        XCTAssertEqual(decision, .fail(code: -1103), file: file, line: line)
        XCTAssertEqual(server.requests.count, 1, file: file, line: line)
    }

    // MARK: - Uploads

    func testPUTUploadOfKnownSizeSendsTheExactBytes() throws {
        let payload = patternBytes(count: 1_500_000)
        let server = try CurlTestServer { request, connection in
            connection.respond(status: "201 Created", headers: [], body: Array("got \(request.body.count)".utf8))
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/upload"))
        easy.setMethod("PUT")
        easy.setUploadSize(Int64(payload.count))
        var offset = 0
        var reads = 0
        easy.onUploadRead = { buffer in
            reads += 1
            if reads % 5 == 0 { return .pause }  // resumed by the loop below
            let count = min(buffer.count, payload.count - offset)
            payload.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
            }
            offset += count
            return .bytes(count)
        }
        var response: [UInt8] = []
        easy.onBody = { response.append(contentsOf: $0); return .consumed }
        try multi.add(easy)
        let completions = try drive(multi, deadline: .seconds(20)) {
            if reads % 5 == 0 { reads += 1; easy.resume() }
        }
        XCTAssertNoThrow(try completions.first?.1.get())
        XCTAssertEqual(easy.responseCode, 201)
        XCTAssertEqual(String(decoding: response, as: UTF8.self), "got \(payload.count)")
        XCTAssertEqual(easy.bytesSent, Int64(payload.count))
        let request = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(request.method, "PUT")
        XCTAssertEqual(request.header("content-length"), "\(payload.count)")
        XCTAssertNil(request.header("expect"), "no 100-continue round trip")
        XCTAssertEqual(request.body.count, payload.count)
        XCTAssertTrue(request.body == payload)
    }

    func testPOSTUploadOfUnknownSizeIsSentChunked() throws {
        let payload = patternBytes(count: 200_000)
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: [], body: [])
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/post"))
        easy.setMethod("POST")
        try easy.setHeaders(["Content-Type: application/octet-stream"])
        var offset = 0
        easy.onUploadRead = { buffer in
            let count = min(buffer.count, payload.count - offset, 7777)
            payload.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
            }
            offset += count
            return .bytes(count)
        }
        try multi.add(easy)
        XCTAssertNoThrow(try drive(multi).first?.1.get())
        let request = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.header("transfer-encoding"), "chunked")
        XCTAssertEqual(request.header("content-type"), "application/octet-stream")
        XCTAssertTrue(request.body == payload)
    }

    func testCustomMethodWithoutBodyAndPOSTWithoutBody() throws {
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "204 No Content", headers: [], body: [])
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        for method in ["DELETE", "POST"] {
            let easy = try CurlEasy()
            try easy.setURL(server.url("/thing"))
            easy.setMethod(method)
            try multi.add(easy)
            XCTAssertNoThrow(try drive(multi).first?.1.get())
            XCTAssertEqual(easy.responseCode, 204)
        }
        let requests = server.requests
        XCTAssertEqual(requests.map(\.method), ["DELETE", "POST"])
        XCTAssertEqual(requests.last?.header("content-length"), "0")
        XCTAssertTrue(requests.allSatisfy { $0.body.isEmpty })
    }

    func testBodyIsRewoundThroughOnUploadSeekFor307Redirect() throws {
        let payload = patternBytes(count: 100_000)
        let server = try CurlTestServer { request, connection in
            if request.target == "/first" {
                connection.respond(status: "307 Temporary Redirect", headers: ["Location: /second"], body: [])
            } else {
                connection.respond(status: "200 OK", headers: [], body: [])
            }
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/first"))
        easy.setMethod("PUT")
        easy.setUploadSize(Int64(payload.count))
        easy.setFollowsRedirects(true, maximum: 2)
        var offset = 0
        var seeks: [Int64] = []
        easy.onUploadRead = { buffer in
            let count = min(buffer.count, payload.count - offset)
            payload.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<offset + count]))
            }
            offset += count
            return .bytes(count)
        }
        easy.onUploadSeek = { position in
            seeks.append(position)
            offset = Int(position)
            return true
        }
        try multi.add(easy)
        XCTAssertNoThrow(try drive(multi).first?.1.get())
        XCTAssertEqual(seeks, [0])
        let requests = server.requests
        XCTAssertEqual(requests.map(\.target), ["/first", "/second"])
        XCTAssertEqual(requests.map(\.method), ["PUT", "PUT"])
        XCTAssertTrue(requests.last?.body == payload)

        // Without onUploadSeek the resend is impossible, and says so.
        let unseekable = try CurlEasy()
        try unseekable.setURL(server.url("/first"))
        unseekable.setMethod("PUT")
        unseekable.setUploadSize(Int64(payload.count))
        unseekable.setFollowsRedirects(true, maximum: 2)
        var sent = 0
        unseekable.onUploadRead = { buffer in
            let count = min(buffer.count, payload.count - sent)
            sent += count
            return .bytes(count)
        }
        try multi.add(unseekable)
        XCTAssertEqual(failureKind(try drive(multi).first?.1), .readFailed)
    }

    func testAbortFromOnUploadRead() throws {
        let server = try CurlTestServer { _, connection in
            connection.respond(status: "200 OK", headers: [], body: [])
        }
        defer { server.stop() }
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(server.url("/upload"))
        easy.setMethod("PUT")
        easy.setUploadSize(1_000_000)
        easy.onUploadRead = { _ in .abort }
        try multi.add(easy)
        XCTAssertEqual(failureKind(try drive(multi).first?.1), .aborted)
    }

    // MARK: - The event loop's wait

    func testPollReturnsWhenAnExtraFDBecomesReadable() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        var idle: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&idle), 0)
        defer { fds.forEach { close($0) }; idle.forEach { close($0) } }
        let writeEnd = fds[1]
        let poller = try Self.currentThreadID()
        let sawBlocked = Locked(false)
        Thread.detachNewThread {
            // Written once the poll is under way, which is what the test is about.
            sawBlocked.withLock { $0 = Self.waitUntilBlockedInPoll(thread: poller) }
            var byte: UInt8 = 1
            _ = write(writeEnd, &byte, 1)
        }
        let multi = try CurlMulti()
        var extra = [CurlMulti.PollRequest(fd: fds[0]), CurlMulti.PollRequest(fd: idle[0])]
        let start = ContinuousClock.now
        let deadline = start + .seconds(10)
        while !extra[0].readable && ContinuousClock.now < deadline {
            try multi.poll(extra: &extra, timeout: .seconds(10))
        }
        XCTAssertTrue(sawBlocked.withLock { $0 }, "the write came while the poll was blocked")
        XCTAssertTrue(extra[0].readable)
        XCTAssertFalse(extra[1].readable)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5), "returned for the write, not at the 10 s timeout")
    }

    func testPollReportsWritable() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { fds.forEach { close($0) } }
        let multi = try CurlMulti()
        var extra = [CurlMulti.PollRequest(fd: fds[1], wantsRead: false, wantsWrite: true)]
        try multi.poll(extra: &extra, timeout: .seconds(5))
        XCTAssertTrue(extra[0].writable)
        XCTAssertFalse(extra[0].readable)
    }

    func testWakeupFromAnotherThreadInterruptsALongPoll() throws {
        let multi = try CurlMulti()
        let waker = multi.waker
        let poller = try Self.currentThreadID()
        let sawBlocked = Locked(false)
        Thread.detachNewThread {
            sawBlocked.withLock { $0 = Self.waitUntilBlockedInPoll(thread: poller) }
            waker.wakeup()
        }
        var none: [CurlMulti.PollRequest] = []
        let start = ContinuousClock.now
        try multi.poll(extra: &none, timeout: .seconds(20))
        XCTAssertTrue(sawBlocked.withLock { $0 }, "the wakeup came while the poll was blocked")
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5), "returned for the wakeup, not at the 20 s timeout")

        // A wakeup before the poll makes the next poll return at once.
        multi.wakeup()
        let again = ContinuousClock.now
        try multi.poll(extra: &none, timeout: .seconds(20))
        XCTAssertLessThan(ContinuousClock.now - again, .seconds(2))
    }

    func testWakerOutlivingItsMultiIsHarmless() throws {
        var waker: CurlMulti.Waker?
        do {
            let multi = try CurlMulti()
            multi.setMaximumConnections(total: 4, perHost: 2)
            waker = multi.waker
        }
        waker?.wakeup()  // the handle is still valid: the waker keeps it
        waker = nil
    }

    // MARK: - Helpers

    /// This thread's kernel id, from /proc/thread-self (a link to "<pid>/task/<tid>").
    static func currentThreadID() throws -> String {
        let link = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")
        return String(link.split(separator: "/").last ?? "")
    }

    /// Waits (with a deadline of 10 s) until thread `tid` of this process is blocked in
    /// poll(2) or ppoll(2), as the kernel reports it in /proc/self/task/<tid>/syscall.
    static func waitUntilBlockedInPoll(thread tid: String) -> Bool {
        #if arch(x86_64)
        let pollCalls: Set<Substring> = ["7", "271"] // poll, ppoll
        #else
        let pollCalls: Set<Substring> = ["73"] // ppoll (aarch64 has no poll)
        #endif
        return PeerProcess.wait(until: Date().addingTimeInterval(10)) {
            guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8),
                  let number = text.split(separator: " ").first else { return false }
            return pollCalls.contains(number)
        }
    }

    /// Runs the event loop (perform, completions, poll) until no transfer is left, or fails the
    /// test at the deadline. `eachIteration` runs between perform and poll.
    private func drive(
        _ multi: CurlMulti, deadline: Duration = .seconds(10),
        file: StaticString = #filePath, line: UInt = #line,
        eachIteration: () -> Void = {}
    ) throws -> [(CurlEasy, Result<Void, CurlError>)] {
        let end = ContinuousClock.now + deadline
        var completions: [(CurlEasy, Result<Void, CurlError>)] = []
        var none: [CurlMulti.PollRequest] = []
        while true {
            try multi.perform()
            while let completion = multi.nextCompletion() { completions.append(completion) }
            if multi.transferCount == 0 { return completions }
            if ContinuousClock.now > end {
                XCTFail("transfers did not finish in \(deadline)", file: file, line: line)
                return completions
            }
            eachIteration()
            try multi.poll(extra: &none, timeout: .milliseconds(20))
        }
    }

    private func failureKind(_ result: Result<Void, CurlError>??) -> CurlError.Kind? {
        guard case .failure(let error)?? = result else { return nil }
        return error.kind
    }
}

// MARK: - Test data

/// Bytes from a simple generator, so a shifted, dropped or repeated chunk cannot compare equal.
private func patternBytes(count: Int) -> [UInt8] {
    var state: UInt32 = 0x1234_5678
    return (0..<count).map { _ in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: state >> 24)
    }
}

/// Binds `fd` to 127.0.0.1 on a free port and returns the port.
private func bindLoopback(_ fd: Int32) throws -> UInt16 {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0 else { throw POSIXTestError(call: "bind") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw POSIXTestError(call: "getsockname") }
    return UInt16(bigEndian: address.sin_port)
}

private struct POSIXTestError: Error {
    let call: String
    let code = errno
}

// MARK: - A minimal HTTP/1.1 server for these tests

/// Answers each connection on 127.0.0.1 with the test's responder, one thread per connection,
/// one request per connection (responses say `Connection: close`). It records every request
/// with its body (Content-Length or chunked). Thread-safe; stopped by `stop()`.
private final class CurlTestServer: @unchecked Sendable {
    struct Request: Sendable {
        var method = ""
        var target = ""
        var headers: [(name: String, value: String)] = []
        var body: [UInt8] = []

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name }?.value
        }
    }

    /// The write side of one accepted connection.
    struct Connection: Sendable {
        let fd: Int32

        /// Sends all bytes; false once the peer is gone.
        @discardableResult
        func send(_ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let result = bytes.withUnsafeBytes {
                    Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                }
                if result < 0 && errno == EINTR { continue }
                if result <= 0 { return false }
                sent += result
            }
            return true
        }

        @discardableResult
        func send(_ text: String) -> Bool { send(Array(text.utf8)) }

        func respond(status: String, headers: [String], body: [UInt8]) {
            var head = "HTTP/1.1 \(status)\r\n"
            for header in headers { head += header + "\r\n" }
            head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            if send(head) { send(body) }
        }

        /// A body without end, until the client goes away (or 15 s pass).
        func streamForever() {
            guard send("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n") else { return }
            let chunk = patternBytes(count: 16 * 1024)
            let end = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < end && send(chunk) {}
        }
    }

    let port: UInt16
    private let listener: Int32
    private let respond: @Sendable (Request, Connection) -> Void
    private let lock = NSLock()
    private var recorded: [Request] = []

    var requests: [Request] { lock.withLock { recorded } }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    init(respond: @escaping @Sendable (Request, Connection) -> Void) throws {
        self.respond = respond
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXTestError(call: "socket") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        do {
            port = try bindLoopback(listener)
        } catch {
            close(listener)
            throw error
        }
        guard listen(listener, 16) == 0 else {
            close(listener)
            throw POSIXTestError(call: "listen")
        }
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting; connections still open finish on their own (all have deadlines).
    func stop() {
        // Only wakes the blocked accept. The accept thread closes the descriptor itself: closing
        // it here could let the next test's socket reuse the number under a still-running loop.
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            // No connection may hang a test run: reads and writes give up after 10 s.
            var limit = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            Thread.detachNewThread { [self] in serve(fd) }
        }
    }

    private func serve(_ fd: Int32) {
        defer { close(fd) }
        var reader = Reader(fd: fd)
        guard let request = reader.readRequest() else { return }
        lock.withLock { recorded.append(request) }
        respond(request, Connection(fd: fd))
        shutdown(fd, Int32(SHUT_WR))
        // Drain briefly so close() does not reset a connection with unread request bytes.
        var scratch = [UInt8](repeating: 0, count: 4096)
        var limit = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        while recv(fd, &scratch, scratch.count, 0) > 0 {}
    }

    /// Buffered reading of one request.
    private struct Reader {
        let fd: Int32
        var buffer: [UInt8] = []

        mutating func readRequest() -> Request? {
            guard let headEnd = fill(until: { $0.firstRange(of: [13, 10, 13, 10]) }) else { return nil }
            let head = String(decoding: buffer[..<headEnd.lowerBound], as: UTF8.self)
            buffer.removeSubrange(..<headEnd.upperBound)
            var lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.removeFirst().split(separator: " ")
            guard requestLine.count >= 2 else { return nil }
            var request = Request(method: String(requestLine[0]), target: String(requestLine[1]))
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                request.headers.append((String(line[..<colon]), value))
            }
            if request.header("transfer-encoding")?.lowercased() == "chunked" {
                guard let body = readChunkedBody() else { return nil }
                request.body = body
            } else if let length = request.header("content-length").flatMap({ Int($0) }) {
                guard take(length).map({ request.body = $0 }) != nil else { return nil }
            }
            return request
        }

        private mutating func readChunkedBody() -> [UInt8]? {
            var body: [UInt8] = []
            while true {
                guard let lineEnd = fill(until: { $0.firstRange(of: [13, 10]) }) else { return nil }
                let sizeText = String(decoding: buffer[..<lineEnd.lowerBound], as: UTF8.self)
                buffer.removeSubrange(..<lineEnd.upperBound)
                guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else { return nil }
                if size == 0 {
                    // Trailers (none expected) end with an empty line.
                    while true {
                        guard let end = fill(until: { $0.firstRange(of: [13, 10]) }) else { return nil }
                        let empty = end.lowerBound == 0
                        buffer.removeSubrange(..<end.upperBound)
                        if empty { return body }
                    }
                }
                guard let chunk = take(size), take(2) != nil else { return nil }
                body += chunk
            }
        }

        private mutating func take(_ count: Int) -> [UInt8]? {
            guard fill(until: { $0.count >= count ? 0..<count : nil }) != nil else { return nil }
            let bytes = Array(buffer[..<count])
            buffer.removeSubrange(..<count)
            return bytes
        }

        /// Reads until `found` finds something in the buffer; nil on EOF, error or timeout.
        private mutating func fill(until found: ([UInt8]) -> Range<Int>?) -> Range<Int>? {
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                if let range = found(buffer) { return range }
                let count = recv(fd, &chunk, chunk.count, 0)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return nil }
                buffer += chunk[..<count]
            }
        }
    }
}
