import Foundation
import Testing
import LoopbackServer
import ContainerInspection
import Digests
import TransferCoding

/// The spine, end to end with real processes: an extension starts a background download
/// and exits; the daemon finishes it and relaunches the host with the extension's
/// identifier; the host receives the events in Apple's order (S1.6, S3.1, S3.2, S3.3).
@Suite(.timeLimit(.minutes(20)))
struct ExtensionDownloadTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("fetch-extension download → transferd → host-app relaunched with the extension's identifier → file in Downloads/")
    func extensionDownloadRelaunchesHost() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 3 << 20)
        server.serve("/files/report.bin", data: payload)
        _ = try DaemonUnderTest.start(container)

        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/files/report.bin").absoluteString], in: container)
        #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
        #expect(outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the first task of a session is task 1")

        let acknowledged = container.waitForCompletionHandler(of: "host-app")
        try #require(acknowledged != nil, "the host was not relaunched, or did not call its completion handler")
        #expect(acknowledged?.session == Self.fetchSession, "the host was launched with the extension's session identifier")
        let host = ContainerSnapshot.read(container.layout).apps.first { $0.bundleIdentifier == "com.example.host" }
        #expect(host?.relaunchDelay == 0.1, "inspection shows the rate limiter's delay after one background relaunch (S6.5)")

        let delivered = container.downloads.appendingPathComponent("report.bin")
        #expect(try SHA256.hexDigest(ofFile: delivered.path) == SHA256.hexDigest(of: payload))

        // Apple's order on relaunch (S3.2).
        let calls = container.logEntries(process: "host-app").filter { ["delegate", "application"].contains($0.category) }.map(\.message)
        let order = ["launched to handle events", "didFinishDownloadingTo: task 1", "didCompleteWithError(nil): task 1", "urlSessionDidFinishEvents", "completion handler called"]
        let positions = order.map { step in calls.firstIndex { $0.hasPrefix(step) } }
        #expect(positions.allSatisfy { $0 != nil }, "missing delegate calls in \(calls)")
        #expect(positions.compactMap { $0 } == positions.compactMap { $0 }.sorted(), "delegate calls out of order: \(calls)")
        #expect(calls.filter { $0.hasPrefix("urlSessionDidFinishEvents") }.count == 1)

        // Acknowledged: no event left, and the temporary file existed only during the call (S3.3).
        #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty }, "the daemon forgot the acknowledged event")
        let caches = container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer/\(Self.fetchSession)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: caches.path)) ?? []).isEmpty, "no partial or temporary file is left")

        // What a person debugging it sees.
        let log = try Executable.bgtransfer.run(["log", "--session", Self.fetchSession], in: container)
        #expect(log.stdout.contains("host-app[\(acknowledged!.pid)] notice com.example.BackgroundTransfer.application [\(Self.fetchSession)]: completion handler called"), "\(log.stdout)")
        let inspect = try Executable.bgtransfer.run(["inspect", "--json"], in: container)
        let snapshot = try RecordCoding.decoder().decode(ContainerSnapshot.self, from: Data(inspect.stdout.utf8))
        #expect(snapshot.daemon.running)
        #expect(snapshot.sessions.map(\.identifier) == [Self.fetchSession])
        #expect(snapshot.sessions.first?.owner == "com.example.host.fetch")
        #expect(snapshot.sessions.first?.pendingEvents.isEmpty == true)
        #expect(snapshot.appGroups.first?.files.contains { $0.path == "Downloads/report.bin" && $0.size == Int64(payload.count) } == true)
    }

    @Test("The extension killed with SIGKILL right after creating its task: the transfer completes and the host is relaunched")
    func extensionKilledAfterCreatingTask() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 4 << 20, seed: 7)
        var options = RouteOptions()
        options.bytesPerSecond = 8 << 20 // about half a second: the extension dies mid-transfer
        server.serve("/slow.bin", data: payload, options: options)
        _ = try DaemonUnderTest.start(container)

        let fetch = try Executable.fetchExtension.start(["download", server.url(for: "/slow.bin").absoluteString, "--wait"], in: container)
        let created = container.waitForLog { $0.process == "fetch-extension" && $0.isStartedDownload }
        try #require(created != nil, "fetch-extension did not create its task: \(fetch.stderr)")
        fetch.kill(signal: SIGKILL)
        let outcome = fetch.wait(timeout: 10)
        #expect(outcome.status != 0, "the extension was killed")

        let acknowledged = container.waitForCompletionHandler(of: "host-app")
        try #require(acknowledged != nil, "the host was not relaunched after the extension died")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("slow.bin").path) == SHA256.hexDigest(of: payload))
        #expect(container.logEntries(process: "host-app", category: "delegate").filter(\.isDidCompleteWithError).count == 1)
    }

    @Test("Download names from the server cannot leave Downloads/")
    func hostileSuggestedFileName() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var options = RouteOptions()
        options.suggestedFilename = "../../escape.txt"
        server.serve("/named", data: Data("hello".utf8), options: options)
        _ = try DaemonUnderTest.start(container)

        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/named").absoluteString], in: container)
        #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
        try #require(container.waitForCompletionHandler(of: "host-app") != nil)
        let names = try FileManager.default.contentsOfDirectory(atPath: container.downloads.path)
        #expect(names.count == 1, "the file landed in Downloads/: \(names)")
        #expect(names.allSatisfy { !$0.hasPrefix(".") && !$0.contains("/") && $0.hasSuffix("escape.txt") }, "\(names)")
        #expect(!FileManager.default.fileExists(atPath: container.appGroup.appendingPathComponent("escape.txt").path))
        #expect(!FileManager.default.fileExists(atPath: container.parent.appendingPathComponent("escape.txt").path))
    }

    @Test("fetch-extension download --wait acknowledges its completion before exiting: no event is left and the host is not launched for it")
    func waitingExtensionAcknowledges() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/files/waited.bin", data: testPayload(size: 256 << 10))
        _ = try DaemonUnderTest.start(container)
        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/files/waited.bin").absoluteString, "--wait"], in: container)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(container.pendingEvents(Self.fetchSession).isEmpty, "the event was acknowledged before the extension exited")
        #expect(container.logEntries(process: "transferd", category: "relaunch").isEmpty, "nothing to launch the host for")
    }
}
