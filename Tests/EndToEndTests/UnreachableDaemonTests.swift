import Foundation
import Testing
import LoopbackServer
import TransferPOSIX

/// A daemon nobody can reach again stops (issue 26): clients find it by its socket's path
/// only, so once that file is gone (its container deleted) or another has its name, it would
/// otherwise run on, unseen, with its transfers, for as long as they last.
@Suite(.timeLimit(.minutes(20)))
struct UnreachableDaemonTests {
    /// A daemon as a client starts it (`--exit-when-idle 30`), busy with a slow download.
    private func busyDaemon(_ container: TestContainer, _ server: LoopbackServer) throws -> DaemonUnderTest {
        var slow = RouteOptions()
        slow.bytesPerSecond = 64 << 10
        server.serve("/slow.bin", data: testPayload(size: 8 << 20, seed: 5), options: slow)
        let daemon = try DaemonUnderTest.start(container, extraArguments: ["--exit-when-idle", "30"])
        let started = try Executable.fetchExtension.run(["download", server.url(for: "/slow.bin").absoluteString], in: container)
        try #require(started.status == 0, "\(started.stderr)")
        try #require(waitUntil { !server.requests.isEmpty }, "the download is under way")
        return daemon
    }

    @Test("A daemon whose container is deleted under it, mid-download, exits within seconds")
    func containerDeleted() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let daemon = try busyDaemon(container, server)

        // The daemon writes in it meanwhile: a file it makes as the removal walks can fail one
        // pass (EPERM, ENOTEMPTY), so remove until nothing is left, with a deadline.
        #expect(waitUntil(timeout: 10) {
            (try? FileManager.default.removeItem(atPath: container.root)) != nil
                || !FileManager.default.fileExists(atPath: container.root)
        }, "the container could not be removed")
        #expect(daemon.process.child.waitForExit(timeout: 10) != nil, "transferd (pid \(daemon.pid)) still runs 10 s after its container was deleted")
    }

    @Test("A daemon whose socket file another took over exits, and leaves the new socket in place")
    func socketReplaced() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let daemon = try busyDaemon(container, server)

        let socket = container.layout.daemonSocket.path
        unlink(socket)
        let other = try UnixSocket.listen(at: socket)
        defer { other.close() }
        #expect(daemon.process.child.waitForExit(timeout: 10) != nil, "transferd (pid \(daemon.pid)) still runs 10 s after its socket was replaced")
        var named = stat()
        #expect(stat(socket, &named) == 0, "the socket that replaced the daemon's is still there")
    }
}
