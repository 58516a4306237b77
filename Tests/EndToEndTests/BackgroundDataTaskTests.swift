import Foundation
import Testing
import LoopbackServer

/// S2.2 with real processes: a data task of a background session runs in the process that
/// made it, over loopback, and when that process is killed mid-body the next process that
/// opens the session hears -997 for it, once; identifiers go on above it.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct BackgroundDataTaskTests {
    static let session = "com.example.host.background"

    @Test("host-app fetch: a data task in the host's background session receives the whole body over loopback, and the daemon never holds it")
    func dataTaskReceivesBody() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 300_000, seed: 227)
        server.serve("/data.bin", data: payload)
        _ = try DaemonUnderTest.start(container)

        let fetched = try Executable.hostApp.run(["fetch", server.url(for: "/data.bin").absoluteString], in: container)
        #expect(fetched.status == 0, "\(fetched.stdout) \(fetched.stderr)")
        let saved = try? Data(contentsOf: container.downloads.appendingPathComponent("data.bin"))
        #expect(saved == payload, "the body didReceive data handed over is the server's, byte for byte (\(saved?.count ?? -1) bytes)")
        #expect(server.requests.filter { $0.path == "/data.bin" }.count == 1)
        let started = container.logEntries(process: "host-app").first(where: \.isStartedDataTask)
        let task = try #require(started?.task)
        #expect(container.task(task, in: Self.session) == nil, "the daemon has no record of a data task")
        let completions = container.logEntries(process: "host-app").filter { $0.isDidCompleteWithError && $0.task == task }
        #expect(completions.count == 1 && completions.first?.completionCode == nil, "didCompleteWithError(nil): \(completions.map(\.message))")
    }

    @Test("SIGKILL of host-app mid-body: the next launch hears didCompleteWithError -997 for that data task, once, and numbers new tasks above it")
    func killedProcessReportsDisconnected() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var slow = RouteOptions()
        slow.bytesPerSecond = 32 << 10 // a minute for the body: the process is killed long before it ends
        server.serve("/slow.bin", data: testPayload(size: 2 << 20, seed: 228), options: slow)
        server.serve("/small.bin", data: testPayload(size: 1_000, seed: 229))
        _ = try DaemonUnderTest.start(container)

        let fetching = try Executable.hostApp.start(["fetch", server.url(for: "/slow.bin").absoluteString], in: container)
        defer { fetching.kill() }
        let received = container.waitForLog { $0.pid == fetching.pid && $0.isDidReceiveData }
        let task = try #require(received?.task, "the data task received part of its body: \(fetching.stderr)")
        fetching.kill(signal: SIGKILL)
        #expect(fetching.wait(timeout: 10).status != 0)

        let launch = try Executable.hostApp.run([], in: container)
        #expect(launch.status == 0, "\(launch.stderr)")
        let cut = container.logEntries(process: "host-app").filter { $0.isDidCompleteWithError && $0.task == task }
        #expect(cut.count == 1, "one didCompleteWithError for the data task, in the next launch: \(cut.map(\.message))")
        #expect(cut.first?.completionCode == -997, "\(cut.map(\.message))")

        // Numbering goes on above the data task; the -997 is not heard again.
        let download = try Executable.hostApp.run(["download", server.url(for: "/small.bin").absoluteString, "--wait"], in: container)
        #expect(download.status == 0, "\(download.stderr)")
        let downloadTask = download.stdout.split(separator: "\n").lazy.compactMap { Int($0) }.first
        #expect((downloadTask ?? 0) > task, "download task \(downloadTask ?? -1) is numbered above data task \(task)")
        let again = try Executable.hostApp.run([], in: container)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(container.logEntries(process: "host-app").filter { $0.isDidCompleteWithError && $0.task == task }.count == 1, "delivered once")
    }
}
