import Foundation
import Testing
import LoopbackServer
import Digests
import TransferPOSIX

/// transferd as a socket-activated service (issue 30): it serves the listening socket systemd
/// passes, leaves that socket in place when it exits, and a connection that waits while no
/// daemon runs is served by the next one, with nothing lost across a SIGKILL.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct SocketActivationTests {
    static let fetchSession = "com.example.host.fetch.background"
    static let socketActivate = Executable(name: "systemd-socket-activate", path: "/usr/bin/systemd-socket-activate")

    @Test("Under systemd-socket-activate an extension's download reaches a relaunched host; SIGKILLed mid-download, the daemon is started by the next connection on the held socket, resumes, and exits when idle leaving the socket to start the next one")
    func activatedDaemonSurvivesKill() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let first = testPayload(size: 256 << 10, seed: 301), slow = testPayload(size: 8 << 20, seed: 302), last = testPayload(size: 64 << 10, seed: 303)
        server.serve("/first.bin", data: first)
        // The slow download stalls at 3 MiB until the daemon is killed (then the route is served
        // whole): the kill is certain to find it unfinished, and only a Range request can resume it.
        let stallAt: Int64 = 3 << 20
        server.serve("/slow.bin", data: slow, options: RouteOptions(etag: "\"slow-1\"", stallAfterBytes: stallAt))
        server.serve("/last.bin", data: last)
        let daemonArguments = ["--relaunch-delay", "0.1", "--exit-when-idle", "1", "--quiet"]

        // 1. systemd-socket-activate binds the socket and execs transferd with it (same pid).
        let activated = try Self.socketActivate.start(["-l", container.layout.daemonSocket.path, Executable.transferd.path, "--container", container.root] + daemonArguments,
                                                      in: container, passContainer: false)
        defer { activated.kill() }
        // It waits for the first connection, then execs transferd (same pid) with the socket.
        try #require(waitUntil { (try? UnixSocket.connect(to: container.layout.daemonSocket.path)).map { $0.close(); return true } ?? false }, "systemd-socket-activate did not listen: \(activated.stderr)")
        #expect(waitUntil { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(activated.pid)/exe")) == Executable.transferd.path }, "the first connection started transferd")
        let fetched = try Executable.fetchExtension.run(["download", server.url(for: "/first.bin").absoluteString], in: container)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        try #require(container.waitForCompletionHandler(of: "host-app", session: Self.fetchSession) != nil, "the host was not relaunched for the extension's session: \(activated.stderr)")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("first.bin").path) == SHA256.hexDigest(of: first))
        #expect(container.processesNamingContainer(executable: "transferd") == [activated.pid], "the activated daemon served the extension, no daemon was started on demand")

        // 2. A slow download, and the daemon SIGKILLed in the middle of it. With the socket
        // gone with it (systemd-socket-activate held it in that very process), the test holds
        // it from now on, as a systemd socket unit would.
        let slowFetch = try Executable.fetchExtension.run(["download", server.url(for: "/slow.bin").absoluteString], in: container)
        #expect(slowFetch.status == 0, "\(slowFetch.stderr)")
        let slowTask = try #require(slowFetch.stdout.split(separator: "\n").lazy.compactMap { Int($0) }.first,
                                    "no task identifier: \(slowFetch.stdout)")
        // Stalled: the server sent all it will, and the daemon wrote most of it (the resume offset
        // is the partial file's size; a SIGKILL keeps what was written).
        let partial = container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer")
            .appendingPathComponent(Self.fetchSession)
            .appendingPathComponent("task-\(slowTask).partial")
        let written = {
            (try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber)?.int64Value ?? 0
        }
        let stalled = waitUntil(timeout: 30) {
            server.bytesSent >= Int64(first.count) + stallAt && written() >= stallAt - (1 << 20)
        }
        try #require(stalled, "the slow download did not stall: \(server.bytesSent) bytes sent, \(written()) on disk")
        // No client may be alive when the daemon dies: until the test holds the socket, nobody
        // listens on it (systemd-socket-activate held it in the daemon's own process), so a
        // client that reconnects then starts a daemon of its own, which takes the socket's name
        // later (seen once in a loaded whole-suite run: the ping of step 4 was refused). A
        // systemd socket unit holds the socket all along, and has no such gap.
        try #require(waitUntil(timeout: 30) { container.processesNamingContainer(executable: "host-app").isEmpty && container.processesNamingContainer(executable: "fetch-extension").isEmpty },
                     "the relaunched host and the extensions did not exit: \(container.processesNamingContainer())")
        sendSignal(activated.pid, SIGKILL)
        #expect(activated.wait(timeout: 10).status == SIGKILL)
        let resumeFrom = written()
        server.serve("/slow.bin", data: slow, options: RouteOptions(etag: "\"slow-1\""))
        let unit = try SocketUnitStandIn(container)

        // 3. The next client connection waits on the socket; it starts a daemon, which serves
        // it and finishes the interrupted download from where it was.
        let lastFetch = try Executable.fetchExtension.start(["download", server.url(for: "/last.bin").absoluteString], in: container)
        defer { lastFetch.kill() }
        let second = try unit.startDaemonOnNextConnection(timeout: 20, arguments: daemonArguments)
        let secondDaemon = try #require(second, "no connection came to the held socket")
        defer { secondDaemon.kill() }
        #expect(lastFetch.wait(timeout: 30).status == 0, "the connection made while no daemon ran was served: \(lastFetch.stderr) \(secondDaemon.stderr)")
        let delivered = waitUntil(timeout: 60) {
            ["slow.bin", "last.bin"].allSatisfy { FileManager.default.fileExists(atPath: container.downloads.appendingPathComponent($0).path) }
                && container.pendingEvents(Self.fetchSession).isEmpty
        }
        #expect(delivered, "both downloads delivered to a relaunched host: \(secondDaemon.stderr)")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("slow.bin").path) == SHA256.hexDigest(of: slow))
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("last.bin").path) == SHA256.hexDigest(of: last))
        let ranges = server.requests.filter { $0.path == "/slow.bin" }.compactMap { $0.headers["Range"] }
        #expect(resumeFrom > 0 && ranges.first == "bytes=\(resumeFrom)-",
                "the interrupted download was resumed from the \(resumeFrom) bytes on disk: \(ranges)")

        // 4. Idle, the daemon exits and leaves the socket to the service manager: the next
        // connection starts another daemon (a removed socket file would make the client start
        // one of its own instead).
        #expect(secondDaemon.wait(timeout: 30).status == 0, "the daemon exits when idle")
        #expect(FileManager.default.fileExists(atPath: container.layout.daemonSocket.path), "the socket file stays for the next activation")
        let client = try RawClient(container)
        defer { client.close() }
        try client.send(.ping, id: 1)
        let third = try #require(try unit.startDaemonOnNextConnection(timeout: 20, arguments: daemonArguments), "no connection came to the held socket")
        defer { third.kill() }
        #expect(client.reply(to: 1, timeout: 20) != nil, "the ping sent while no daemon ran is answered: \(third.stderr)")
        #expect(container.processesNamingContainer(executable: "transferd") == [third.pid], "the socket's daemon serves, none was started on demand")
    }

    @Test("A passed socket that is not the container's is refused: transferd exits 78 (EX_CONFIG) naming the container's socket")
    func foreignSocketRefused() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let elsewhere = container.parent.appendingPathComponent("other.sock").path
        let activated = try Self.socketActivate.start(["-l", elsewhere, Executable.transferd.path, "--container", container.root], in: container, passContainer: false)
        // The first connection makes systemd-socket-activate exec transferd with the socket.
        try #require(waitUntil { (try? UnixSocket.connect(to: elsewhere)).map { $0.close(); return true } ?? false }, "systemd-socket-activate did not listen: \(activated.stderr)")
        let outcome = activated.wait(timeout: 20)
        #expect(outcome.status == 78, "\(outcome.stderr)")
        #expect(outcome.stderr.contains(container.layout.daemonSocket.path) && outcome.stderr.contains(elsewhere), "\(outcome.stderr)")
    }
}
