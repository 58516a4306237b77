import Foundation
import Testing
import LoopbackServer

/// `bgtransfer watch`, end to end: the daemon's watch pushes reach the tool, which stays
/// quiet (plain lines, no escapes) when its stdout is a pipe.
@Suite(.timeLimit(.minutes(20)))
struct WatchTests {
    static let fetchSession = "com.example.host.fetch.background"

    /// A throttled download in the fetch extension's session (the extension exits at once).
    func startSlowDownload(_ container: TestContainer, _ server: LoopbackServer) throws {
        var options = RouteOptions()
        options.bytesPerSecond = 512 << 10 // about 8 s for 4 MiB: time to look at it
        server.serve("/slow.bin", data: testPayload(size: 4 << 20, seed: 11), options: options)
        let fetch = try Executable.fetchExtension.run(["download", server.url(for: "/slow.bin").absoluteString, "--description", "slow report"], in: container)
        try #require(fetch.status == 0, "fetch-extension failed: \(fetch.stderr)")
    }

    @Test("watch on a pipe prints a start line and a finish line, no escapes; --once lists the running task with its bytes")
    func watchOnAPipe() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        _ = try DaemonUnderTest.start(container)
        let watch = try Executable.bgtransfer.start(["watch"], in: container)
        defer { watch.kill() }

        try startSlowDownload(container, server)
        let started = "started \(Self.fetchSession)/1 download slow report "
        #expect(waitUntil { watch.stdout.contains(started) }, "no start line: \(watch.stdout) \(watch.stderr)")

        // While it runs, --once lists it with its bytes (the size known once the head is in).
        var listing = ""
        let listed = waitUntil(timeout: 15) {
            listing = (try? Executable.bgtransfer.run(["watch", "--once"], in: container, timeout: 10))?.stdout ?? ""
            return listing.range(of: #"^com\.example\.host\.fetch\.background/1 download slow report [0-9.]+ (B|KiB|MiB) / 4\.0 MiB"#, options: .regularExpression) != nil
        }
        #expect(listed, "--once did not list the running task: \(listing)")
        let otherSession = try Executable.bgtransfer.run(["watch", "--once", "--session", "com.example.other"], in: container, timeout: 10)
        #expect(otherSession.status == 0 && otherSession.stdout == "no transfers running\n", "\(otherSession.stdout) \(otherSession.stderr)")

        let finished = "finished \(Self.fetchSession)/1 download slow report"
        #expect(waitUntil(timeout: 40) { watch.stdout.contains(finished) }, "no finish line: \(watch.stdout)")

        watch.kill(signal: SIGINT)
        let outcome = watch.wait(timeout: 10)
        #expect(outcome.status == 0, "Ctrl-C ends the watch cleanly: \(outcome.stderr)")
        #expect(!outcome.stdout.contains("\u{1B}"), "no escape sequences on a pipe: \(outcome.stdout.debugDescription)")
        let lines = outcome.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix(started) && lines[1] == finished[...], "one line at the start, one at the end: \(lines)")
    }

    @Test("watch --once without a daemon exits with status 1 and says so")
    func onceWithoutDaemon() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let outcome = try Executable.bgtransfer.run(["watch", "--once"], in: container, timeout: 20)
        #expect(outcome.status == 1)
        #expect(outcome.stderr.contains("transferd is not running"), "\(outcome.stderr)")
        #expect(container.processesNamingContainer(executable: "transferd").isEmpty, "watching starts no daemon")
    }

    @Test("watch started before the daemon says it waits, then follows the daemon that comes up")
    func waitsForTheDaemon() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let watch = try Executable.bgtransfer.start(["watch"], in: container)
        defer { watch.kill() }
        #expect(waitUntil { watch.stderr.contains("transferd is not running; waiting for it") }, "\(watch.stderr)")

        // The extension starts the daemon on demand; the watch finds it.
        try startSlowDownload(container, server)
        #expect(waitUntil { watch.stdout.contains("started \(Self.fetchSession)/1 download slow report ") }, "\(watch.stdout) \(watch.stderr)")
    }
}
