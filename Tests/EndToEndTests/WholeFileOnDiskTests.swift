import Digests
import Foundation
import LoopbackServer
import TestPeers
import Testing

/// A daemon killed after a download's last byte reached the disk but before its end was
/// recorded asks, once restarted, for the bytes after the end; the server answers 416 with a
/// page. The file on disk is whole: the page must never be appended to it, and any other 416
/// starts over. Against the project's server (a real kill at that instant) and nginx.
@Suite(.timeLimit(.minutes(20)))
struct WholeFileOnDiskTests {
    static func size(of file: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: file.path)[.size]) as? NSNumber)?.intValue ?? 0
    }

    @Test("Killed with the whole body on disk, its end withheld: the 416 page is not appended")
    func killedBeforeTheEndWasRecorded() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 1 << 20, seed: 45)
        // Chunked, every byte sent, the last chunk withheld: the daemon has the whole body and
        // waits for its end.
        var withheld = RouteOptions(omitContentLength: true)
        withheld.stallAfterBytes = Int64(payload.count)
        server.serve("/whole.bin", data: payload, options: withheld)
        let daemon = try DaemonUnderTest.start(container)
        let url = server.url(for: "/whole.bin").absoluteString
        let started = try Executable.fetchExtension.run(["download", url], in: container)
        try #require(started.status == 0, "\(started.stderr)")
        let partial = fetchTask1PartialFile(in: container)
        try #require(waitUntil(timeout: 30) { Self.size(of: partial) == payload.count },
                     "the body did not reach the disk")
        try #require(waitForJournaledValidator(ofTask1In: container), "the response's validator was never journaled")
        daemon.process.kill(signal: SIGKILL)
        _ = daemon.process.wait(timeout: 10)

        server.serve("/whole.bin", data: payload)
        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        let delivered = container.downloads.appendingPathComponent("whole.bin")
        #expect(Self.size(of: delivered) == payload.count, "the 416 page was appended")
        #expect(try SHA256.hexDigest(ofFile: delivered.path) == SHA256.hexDigest(of: payload))
        #expect(server.requests.last { $0.path == "/whole.bin" }?.header("Range") == "bytes=\(payload.count)-")
        let delegateLines = container.logEntries(process: "host-app", category: "delegate")
        #expect(delegateLines.contains { $0.isDidCompleteWithoutError(task: 1, status: 200) },
                "the earlier attempt's 200 is the task's answer")
    }

    @Test("A 416 naming another length starts over from zero: the file is the resource's, not the old bytes")
    func otherLengthStartsOver() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 1 << 20, seed: 46)
        var slow = RouteOptions()
        slow.bytesPerSecond = 1 << 20
        server.serve("/grown.bin", data: payload, options: slow)
        let daemon = try DaemonUnderTest.start(container)
        let url = server.url(for: "/grown.bin").absoluteString
        try #require(try Executable.fetchExtension.run(["download", url], in: container).status == 0)
        let partial = try killDaemon(daemon, in: container, onceTask1Has: 128 << 10)
        // More bytes on disk than the resource has: its 416 says `bytes */<its size>`.
        try (payload + Data(repeating: 0x41, count: 4096)).write(to: partial)

        server.serve("/grown.bin", data: payload)
        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        let delivered = container.downloads.appendingPathComponent("grown.bin")
        #expect(try SHA256.hexDigest(ofFile: delivered.path) == SHA256.hexDigest(of: payload))
        let ranges = server.requests.filter { $0.path == "/grown.bin" }.map { $0.header("Range") }
        #expect(ranges.suffix(2) == ["bytes=\(payload.count + 4096)-", nil], "a 416 then the whole resource: \(ranges)")
    }

    @Test("nginx's 416 page after a kill with every byte on disk is not appended: the file is byte-exact",
          .enabled(if: Nginx.isInstalled, "needs nginx (bash .ci/run installs it)"))
    func nginxPageIsNotAppended() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let nginx = try Nginx.start(sites: [.plain(name: "files", directives: "limit_rate 256k;")])
        defer { nginx.stop() }
        let payload = try nginx.serve("whole.bin", bytes: 1 << 20, seed: 45)
        let url = "http://127.0.0.1:\(nginx.port("files"))/whole.bin"
        let daemon = try DaemonUnderTest.start(container)
        try #require(try Executable.fetchExtension.run(["download", url], in: container).status == 0)
        let partial = try killDaemon(daemon, in: container, onceTask1Has: 64 << 10)
        try payload.write(to: partial) // as if the last byte had arrived just before the kill

        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        let delivered = container.downloads.appendingPathComponent("whole.bin")
        #expect(Self.size(of: delivered) == payload.count, "nginx's 416 page was appended")
        #expect(try SHA256.hexDigest(ofFile: delivered.path) == SHA256.hexDigest(of: payload))
        #expect(nginx.accessLogLines.contains { $0.contains(" 416 GET /whole.bin \"bytes=\(payload.count)-\"") },
                "nginx answered the resumed request with 416: \(nginx.accessLogLines)")
    }
}
