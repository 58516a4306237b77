import Foundation
import Testing
import LoopbackServer
import Digests
import TransferContainer

/// Whatever dies, no event is lost and none reaches a delegate twice (S3.4, S4.1).
@Suite(.timeLimit(.minutes(20)))
struct RedeliveryTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("A host killed before its completion handler gets the events again on the next launch; its delegate sees each once")
    func hostKilledBeforeCompletionHandler() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 1 << 20, seed: 3)
        server.serve("/a.bin", data: payload)
        let marker = container.parent.appendingPathComponent("crashed-once").path
        _ = try DaemonUnderTest.start(container, environment: ["HOST_APP_MISBEHAVE_ONCE": "crash:" + marker])

        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/a.bin").absoluteString], in: container)
        #expect(outcome.status == 0, "\(outcome.stderr)")

        let acknowledged = container.waitForCompletionHandler(of: "host-app")
        try #require(acknowledged != nil, "the host was not relaunched a second time")
        let crashed = container.logEntries(process: "host-app").first { $0.message.hasPrefix("crashing before calling the completion handler") }
        try #require(crashed != nil, "the first launch did not crash as asked")
        #expect(crashed!.pid != acknowledged!.pid, "two launches")

        let delegateCalls = container.logEntries(process: "host-app", category: "delegate").map(\.message)
        #expect(delegateCalls.filter { $0.hasPrefix("didFinishDownloadingTo: task 1") }.count == 1, "\(delegateCalls)")
        #expect(delegateCalls.filter { $0.hasPrefix("didCompleteWithError(nil): task 1") }.count == 1, "\(delegateCalls)")
        #expect(delegateCalls.filter { $0.hasPrefix("urlSessionDidFinishEvents") }.count == 2, "each launch is told its events are finished")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("a.bin").path) == SHA256.hexDigest(of: payload))
        #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty })
    }

    @Test("transferd killed with SIGKILL mid-download: restarted, it resumes with Range and If-Range from the bytes on disk")
    func daemonKilledMidDownload() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 6 << 20, seed: 11)
        var options = RouteOptions()
        options.bytesPerSecond = 4 << 20
        server.serve("/big.bin", data: payload, options: options)
        let daemon = try DaemonUnderTest.start(container)

        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/big.bin").absoluteString], in: container)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let partial = try killDaemon(daemon, in: container, onceTask1Has: 1 << 20)
        let onDisk = ((try FileManager.default.attributesOfItem(atPath: partial.path)[.size]) as? NSNumber)?.int64Value ?? 0

        _ = try DaemonUnderTest.start(container)
        let acknowledged = container.waitForCompletionHandler(of: "host-app", timeout: 40)
        try #require(acknowledged != nil, "the download did not finish after the restart")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("big.bin").path) == SHA256.hexDigest(of: payload))

        let requests = server.requests.filter { $0.path == "/big.bin" }
        #expect(requests.count == 2, "one request before the kill, one after: \(requests.map(\.path))")
        let resumed = try #require(requests.last)
        let range = try #require(resumed.header("Range"))
        let offset = Int64(range.dropFirst("bytes=".count).dropLast()) ?? -1
        #expect(offset >= onDisk - (1 << 20) && offset <= onDisk + (1 << 20), "resumed near the \(onDisk) bytes on disk, asked \(range)")
        #expect(resumed.header("If-Range") != nil, "the resumed request names the validator first seen")
    }

    @Test("A resumed download whose server ignores ranges starts over from zero, never a mixed file")
    func serverIgnoringRangesRestartsFromZero() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 4 << 20, seed: 5)
        var options = RouteOptions()
        options.bytesPerSecond = 4 << 20
        server.serve("/noranges.bin", data: payload, options: options)
        let daemon = try DaemonUnderTest.start(container)
        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/noranges.bin").absoluteString], in: container).status == 0)
        try killDaemon(daemon, in: container, onceTask1Has: 1 << 20)

        // The same bytes, but the server now ignores Range and answers 200.
        options.acceptsRanges = false
        options.bytesPerSecond = nil
        server.serve("/noranges.bin", data: payload, options: options)
        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("noranges.bin").path) == SHA256.hexDigest(of: payload))
    }

    @Test("Killed with every byte on disk but before it finished: the restart's 416 completes the download, not an empty file")
    func killedWithWholeFileOnDisk() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 2 << 20, seed: 29)
        var options = RouteOptions()
        options.bytesPerSecond = 1 << 20
        server.serve("/whole.bin", data: payload, options: options)
        let daemon = try DaemonUnderTest.start(container)
        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/whole.bin").absoluteString], in: container).status == 0)
        let partial = try killDaemon(daemon, in: container, onceTask1Has: 256 << 10)
        try payload.write(to: partial) // as if the last byte had arrived just before the kill

        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("whole.bin").path) == SHA256.hexDigest(of: payload))
        #expect(server.requests.last { $0.path == "/whole.bin" }?.header("Range") == "bytes=\(payload.count)-")
        #expect(container.logEntries(process: "host-app", category: "delegate").contains { $0.isDidCompleteWithoutError(task: 1, status: 200) })
    }

    @Test("A 503 asking to come back later is not the task's answer: its record keeps the 200's response and the bytes on disk, and a daemon killed during the wait with every byte on disk delivers the file as the 200 it is, not as a 24-byte 503")
    func serviceUnavailableLeavesTheRecordAlone() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 2 << 20, seed: 31)
        var slow = RouteOptions()
        slow.bytesPerSecond = 1 << 20
        server.serve("/later.bin", data: payload, options: slow)
        let first = try DaemonUnderTest.start(container)
        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/later.bin").absoluteString], in: container).status == 0)
        let partial = try killDaemon(first, in: container, onceTask1Has: 256 << 10)
        let onDisk = try #require((try FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber)?.int64Value)

        // The resumed request meets a 503 with Retry-After; the hold is on disk.
        var unavailable = RouteOptions()
        unavailable.status = 503
        unavailable.retryAfter = 2
        server.serve("/later.bin", data: payload, options: unavailable)
        let second = try DaemonUnderTest.start(container)
        var held: TaskRecord?
        _ = waitUntil(timeout: 30) {
            held = container.task(1, in: Self.fetchSession).flatMap { $0.retryCause == nil ? nil : $0 }
            return held != nil
        }
        let record = try #require(held, "no hold after the 503 was recorded")
        #expect(record.response?.statusCode == 200, "the record took the 503 for the task's answer: \(String(describing: record.response))")
        #expect(record.countOfBytesExpectedToReceive == Int64(payload.count) && record.countOfBytesReceived == onDisk,
                "counts \(record.countOfBytesReceived) of \(record.countOfBytesExpectedToReceive), \(onDisk) bytes on disk")
        second.process.kill(signal: SIGKILL)
        _ = second.process.wait(timeout: 10)

        // Every byte arrived before the kill; the restart asks for the rest and gets a 416.
        try payload.write(to: partial)
        server.serve("/later.bin", data: payload)
        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        #expect(server.requests.last { $0.path == "/later.bin" }?.header("Range") == "bytes=\(payload.count)-")
        #expect(container.logEntries(process: "host-app", category: "delegate").contains { $0.isDidCompleteWithoutError(task: 1, status: 200) })
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("later.bin").path) == SHA256.hexDigest(of: payload))
    }

    @Test("A resource without any validator is fetched again from zero after a kill, never spliced")
    func noValidatorRestartsFromZero() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 4 << 20, seed: 23)
        var options = RouteOptions()
        options.bytesPerSecond = 4 << 20
        options.validators = .none
        server.serve("/plain.bin", data: payload, options: options)
        let daemon = try DaemonUnderTest.start(container)
        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/plain.bin").absoluteString], in: container).status == 0)
        try killDaemon(daemon, in: container, onceTask1Has: 1 << 20, resourceHasValidator: false)
        options.bytesPerSecond = nil
        server.serve("/plain.bin", data: payload, options: options)
        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("plain.bin").path) == SHA256.hexDigest(of: payload))
        #expect(server.requests.filter { $0.path == "/plain.bin" }.last?.header("Range") == nil, "no range without a validator to check it against")
    }

    @Test("A resource whose validator changed while the daemon was down is fetched again from zero")
    func changedValidatorRestartsFromZero() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let old = testPayload(size: 4 << 20, seed: 21)
        let new = testPayload(size: 4 << 20, seed: 22)
        var options = RouteOptions()
        options.bytesPerSecond = 4 << 20
        options.etag = "\"v1\""
        server.serve("/changing.bin", data: old, options: options)
        let daemon = try DaemonUnderTest.start(container)
        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/changing.bin").absoluteString], in: container).status == 0)
        try killDaemon(daemon, in: container, onceTask1Has: 1 << 20)

        options.etag = "\"v2\""
        options.bytesPerSecond = nil
        server.serve("/changing.bin", data: new, options: options)
        _ = try DaemonUnderTest.start(container)
        try #require(container.waitForCompletionHandler(of: "host-app", timeout: 40) != nil)
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("changing.bin").path) == SHA256.hexDigest(of: new), "the new resource whole, not old bytes followed by new ones")
    }
}
