import Foundation
import Testing
import LoopbackServer
import Digests

/// The stand-ins as apps that check what they get (issue "command lines a developer
/// trusts"): an error page never replaces a good file, and `--wait` shows its own task.
@Suite(.timeLimit(.minutes(20)))
struct StandInCommandLineTests {
    @Test("A 404 does not replace a good file in Downloads/: --wait exits 1 naming the status, and the good file stays")
    func errorPageIsNotSaved() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 256 << 10, seed: 404)
        server.serve("/sub/big.bin", data: payload)
        _ = try DaemonUnderTest.start(container)
        let url = server.url(for: "/sub/big.bin").absoluteString

        let good = try Executable.fetchExtension.run(["download", url, "--wait"], in: container)
        try #require(good.status == 0, "\(good.stderr)")
        let saved = container.downloads.appendingPathComponent("big.bin")
        #expect(try SHA256.hexDigest(ofFile: saved.path) == SHA256.hexDigest(of: payload))

        var missing = RouteOptions()
        missing.status = 404
        server.serve("/sub/big.bin", data: Data(), options: missing)
        let failed = try Executable.fetchExtension.run(["download", url, "--wait"], in: container)
        #expect(failed.status == 1, "status \(failed.status ?? -1)")
        #expect(failed.stderr.contains("fetch-extension") && failed.stderr.contains("HTTP 404"), "\(failed.stderr)")
        #expect(try SHA256.hexDigest(ofFile: saved.path) == SHA256.hexDigest(of: payload), "the good file is still there")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: container.downloads.path)) ?? []) == ["big.bin"], "no error page beside it")
    }

    @Test("--wait's progress bar (on a terminal) follows the task waited for, not another task of the session")
    func barFollowsItsTask() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var slow = RouteOptions()
        slow.bytesPerSecond = 128 << 10
        server.serve("/slow.bin", data: testPayload(size: 8 << 20, seed: 1), options: slow)
        server.serve("/fast.bin", data: testPayload(size: 4 << 20, seed: 2))
        _ = try DaemonUnderTest.start(container)
        let started = try Executable.hostApp.run(["download", server.url(for: "/slow.bin").absoluteString], in: container)
        try #require(started.status == 0, "\(started.stderr)")
        #expect(waitUntil { server.requests.contains { $0.path == "/slow.bin" } }, "the slow task runs")

        // script(1) gives the stand-in a terminal, so that it draws its bar.
        let command = "\(Executable.hostApp.path) --container \(container.root) download \(server.url(for: "/fast.bin").absoluteString) --wait"
        let waited = try Executable(name: "script", path: "/usr/bin/script").start(["-qec", command, "/dev/null"], in: container, passContainer: false).wait(timeout: 60)
        #expect(waited.status == 0, "\(waited.stdout)")
        #expect(waited.stdout.contains("fast.bin"), "the bar shows the waited-for task: \(waited.stdout.suffix(400))")
        #expect(!waited.stdout.contains("slow.bin"), "the other task's progress does not move the bar: \(waited.stdout.suffix(400))")
    }

    @Test("Everything in the container is private to the user, as the README says: folders 0700, files and the socket 0600 (Downloads/ and the host's queue included)")
    func containerIsPrivate() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/private.bin", data: testPayload(size: 32 << 10, seed: 7))
        _ = try DaemonUnderTest.start(container)
        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/private.bin").absoluteString, "--wait"], in: container).status == 0)
        #expect(try Executable.hostApp.run(["enqueue", server.url(for: "/private.bin").absoluteString], in: container).status == 0)
        var open: [String] = []
        let root = container.root
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            var st = stat()
            guard lstat(root + "/" + relative, &st) == 0 else { continue }
            let mode = st.st_mode & 0o777
            let kind = st.st_mode & S_IFMT
            if kind == S_IFDIR && mode != 0o700 || kind != S_IFDIR && mode != 0o600 { open.append("\(relative) \(String(mode, radix: 8))") }
        }
        #expect(open.isEmpty, "\(open)")
    }

    @Test("--wait says why it waits, as the reason changes: a refused connection and the time of the next retry, then the device conditions")
    func waitSaysWhy() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        // A port nobody listens on: the daemon retries with backoff, for days.
        let refused = try LoopbackServer()
        let port = refused.port
        refused.stop()
        let waiting = try Executable.fetchExtension.start(["download", "http://127.0.0.1:\(port)/late", "--wait"], in: container)
        defer { waiting.kill() }
        #expect(waitUntil(timeout: 20) { waiting.stderr.contains("retrying in") }, "stderr: \(waiting.stderr)")
        #expect(waiting.stderr.contains("fetch-extension: task 1:") && waiting.stderr.lowercased().contains("connect"), "the line names the program, the task and the error: \(waiting.stderr)")
        let conditions = try Executable.bgtransfer.run(["conditions", "--network", "offline"], in: container)
        try #require(conditions.status == 0, "\(conditions.stderr)")
        #expect(waitUntil(timeout: 20) { waiting.stderr.contains("waiting for connectivity") }, "the new reason is said: \(waiting.stderr)")
    }

    @Test("--wait on a link that stalls says so: no data for the idle timeout, and when it retries")
    func waitSaysTheLinkStalled() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/stalls", data: testPayload(size: 100_000, seed: 3), options: RouteOptions(stallAfterBytes: 10_000))
        let waiting = try Executable.fetchExtension.start(["download", server.url(for: "/stalls").absoluteString, "--wait", "--request-timeout", "1"], in: container)
        defer { waiting.kill() }
        #expect(waitUntil(timeout: 20) { waiting.stderr.contains("retrying in") }, "stderr: \(waiting.stderr)")
        #expect(waiting.stderr.contains("fetch-extension: task 1:") && waiting.stderr.contains("no data for 1 s"), "the line says the link went silent: \(waiting.stderr)")
    }
}
