import Foundation
import Testing
import LoopbackServer
import TransferPOSIX

/// transferd speaks systemd's notify protocol when `NOTIFY_SOCKET` is set (issue 30): ready
/// once its socket serves, a status counting sessions and running tasks, the watchdog's
/// keep-alive, stopping on the way out. The test is the service manager.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct ServiceNotifyTests {
    @Test("READY=1 comes when the socket serves; STATUS= counts the running task and its end; WATCHDOG=1 at half of WATCHDOG_USEC; STOPPING=1 on SIGTERM")
    func notifyProtocol() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 3 << 20, seed: 311)
        var throttled = RouteOptions()
        throttled.bytesPerSecond = 1 << 20 // three seconds: long enough to be seen running
        server.serve("/slow.bin", data: payload, options: throttled)
        let manager = try NotifyListener(path: container.parent.appendingPathComponent("notify.sock").path)

        let daemon = try Executable.transferd.start(["--quiet"], in: container, environment: ["NOTIFY_SOCKET": manager.path, "WATCHDOG_USEC": "400000"])
        defer { daemon.kill() }
        let ready = manager.next(timeout: 20) { $0.split(separator: "\n").contains("READY=1") }
        try #require(ready != nil, "no READY=1: \(manager.received) \(daemon.stderr)")
        let connection = try? UnixSocket.connect(to: container.layout.daemonSocket.path)
        #expect(connection != nil, "the socket accepts a connection once READY=1 is sent")
        connection?.close()
        #expect(ready?.contains("STATUS=0 sessions, 0 running tasks") == true, "\(ready ?? "")")

        let host = try Executable.hostApp.start(["download", server.url(for: "/slow.bin").absoluteString, "--wait"], in: container)
        defer { host.kill() }
        #expect(manager.next(timeout: 20) { $0 == "STATUS=1 sessions, 1 running tasks" } != nil, "the running task is counted: \(manager.received)")
        #expect(manager.next(timeout: 20) { $0 == "STATUS=1 sessions, 0 running tasks" } != nil, "the finished task is no longer counted: \(manager.received)")
        #expect(host.wait(timeout: 30).status == 0, "\(host.stderr)")
        #expect(manager.received.filter { $0 == "WATCHDOG=1" }.count >= 4, "the watchdog is fed every 0.2 s over several seconds: \(manager.received)")

        // The queue (ten datagrams) filled while nobody read; the daemon went on regardless.
        _ = manager.next(timeout: 0.3) { _ in false }
        sendSignal(daemon.pid, SIGTERM)
        #expect(manager.next(timeout: 20) { $0.split(separator: "\n").contains("STOPPING=1") } != nil, "\(manager.received)")
        #expect(daemon.wait(timeout: 20).status == 0)
    }
}
