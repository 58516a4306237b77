import BackgroundTransferTesting
import Testing

/// Reader's background transfers, tested as iOS would treat the app: each test gets a device
/// of its own (a container and its transferd), runs the real executables, and reads what
/// their delegates saw.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ReaderTests {
    /// Deterministic bytes to serve.
    static func payload(_ size: Int) -> Data { Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }) }

    @Test("The system kills the widget after it started a download; the download reaches the app")
    func widgetKilled() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let article = Self.payload(1 << 20)
        server.serve("/issue.pdf", data: article, options: RouteOptions(bytesPerSecond: 512 << 10)) // two seconds

        let widget = try device.launch("reader-widget", arguments: ["download", server.url(for: "/issue.pdf").absoluteString])
        try await widget.succeeds(within: 30)
        try await device.kill("reader-widget") // whatever of it is left

        let finished = try await device.events.first("reader-app to finish the events") { $0.process == "reader-app" && $0.kind == .didFinishEvents }
        #expect(finished.session == "com.example.reader.widget.background")
        let saved = device.appGroupFolder("group.com.example.reader").appendingPathComponent("Downloads/issue.pdf")
        #expect(FileManager.default.contents(atPath: saved.path) == article)
        try device.events.checkAppleOrder()
        try device.events.checkNothingDeliveredTwice()
    }

    @Test("A force quit stops relaunches until the user launches the program; then the cancellation arrives")
    func forceQuit() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/slow.bin", data: Self.payload(1 << 20), options: RouteOptions(bytesPerSecond: 64 << 10))
        server.serve("/small.bin", data: Self.payload(1 << 10))

        try await device.launch("fetch-later", arguments: [server.url(for: "/slow.bin").absoluteString]).succeeds(within: 30)
        #expect(try device.forceQuit("program.fetch-later") == 1)
        // Nothing to wait for: a relaunch would come within the 0.1 s rate limit; give it 2 s.
        try await Task.sleep(for: .seconds(2))
        #expect(device.processes(named: "fetch-later").isEmpty && device.events.of("fetch-later").isEmpty, "not relaunched while force-quit")

        // The user launches it: the cancellation (-999, reason 0: force quit) is delivered.
        try await device.launch("fetch-later", arguments: [server.url(for: "/small.bin").absoluteString]).succeeds(within: 30)
        let cancelled = try await device.events.completion(of: 1, in: "downloads")
        #expect(cancelled.errorCode == -999)
        #expect(cancelled.cancelledReason == 0)
        try device.events.checkNothingDeliveredTwice()
    }

    @Test("Offline, a download waits instead of failing; back online, it is delivered")
    func offlineWaits() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let weights = Self.payload(256 << 10)
        server.serve("/model.bin", data: weights)

        try device.setConditions(network: .offline)
        try await device.launch("fetch-later", arguments: [server.url(for: "/model.bin").absoluteString]).succeeds(within: 30)
        #expect(!server.waitForRequests(count: 1, timeout: 2), "no request while offline")
        #expect(device.events.of("fetch-later").isEmpty, "nothing delivered, no failure")

        try device.setConditions(network: .wifi)
        let done = try await device.events.completion(of: 1, in: "downloads")
        #expect(done.errorCode == nil && done.statusCode == 200)
        #expect(FileManager.default.contents(atPath: device.privateFolder("program.fetch-later").appendingPathComponent("Documents/model.bin").path) == weights)
    }

    @Test("A 503 with Retry-After is retried after the delay, and the file is delivered")
    func serviceUnavailableIsRetried() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/feed.json", data: Data("busy".utf8), options: RouteOptions(status: 503, retryAfter: 1))

        try await device.launch("fetch-later", arguments: [server.url(for: "/feed.json").absoluteString]).succeeds(within: 30)
        #expect(server.waitForRequests(count: 1, timeout: 20))
        let feed = Data("{\"articles\": 3}".utf8)
        server.serve("/feed.json", data: feed) // the server recovers

        let done = try await device.events.completion(of: 1, in: "downloads")
        #expect(done.statusCode == 200, "the 503 was not delivered as the answer")
        #expect(FileManager.default.contents(atPath: device.privateFolder("program.fetch-later").appendingPathComponent("Documents/feed.json").path) == feed)
        let times = server.requests.filter { $0.path == "/feed.json" }.map(\.time)
        #expect(times.count == 2 && times[1].timeIntervalSince(times[0]) >= 0.9, "retried once, after Retry-After")
    }

    @Test("fetch-later run again mid-download, across a daemon restart, does not start a second download")
    func restartedProgramStartsNoDuplicate() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let url = server.url(for: "/big.iso")
        server.serve("/big.iso", data: Self.payload(1 << 20), options: RouteOptions(bytesPerSecond: 256 << 10)) // four seconds

        let first = try device.launch("fetch-later", arguments: [url.absoluteString])
        try await first.succeeds(within: 30)
        try await eventually("a quarter of it sent") { server.bytesSent >= 256 << 10 }
        try await device.restartDaemon() // the daemon dies mid-download too; the task survives it
        let again = try device.launch("fetch-later", arguments: [url.absoluteString])
        try await again.succeeds(within: 30)

        try await device.events.completion(of: 1, in: "downloads")
        #expect(device.events.all.filter { $0.kind == .didCompleteWithError }.map(\.task) == [1], "one download, task 1")
        #expect(server.requests.filter { $0.path == "/big.iso" && $0.header("Range") == nil }.count == 1, "fetched from zero once, then resumed")
        try device.events.checkAppleOrder()
        try device.events.checkNothingDeliveredTwice()
    }

    @Test("Over HTTPS, a server certified by a CA the device trusts delivers; one that signed its own certificate fails with -1203")
    func https() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        try device.trustTestCertificateAuthority()
        let trusted = try TestHTTPSServer()
        defer { trusted.stop() }
        let selfSigned = try TestHTTPSServer(certificate: .selfSigned)
        defer { selfSigned.stop() }
        let paper = try trusted.serve("paper.pdf", bytes: 200_000)
        try selfSigned.serve("other.pdf", bytes: 1_000)

        try await device.launch("fetch-later", arguments: [trusted.url(for: "paper.pdf").absoluteString]).succeeds(within: 30)
        let done = try await device.events.completion(of: 1, in: "downloads")
        #expect(done.errorCode == nil && done.statusCode == 200)
        #expect(FileManager.default.contents(atPath: device.privateFolder("program.fetch-later").appendingPathComponent("Documents/paper.pdf").path) == paper)
        #expect(trusted.requests.map(\.protocolName) == ["HTTP/2.0"], "HTTP/2 by ALPN")

        try await device.launch("fetch-later", arguments: [selfSigned.url(for: "other.pdf").absoluteString]).succeeds(within: 30)
        let refused = try await device.events.completion(of: 2, in: "downloads")
        #expect(refused.errorCode == -1203)
        #expect(selfSigned.requests.isEmpty, "no request reached it")
    }
}
