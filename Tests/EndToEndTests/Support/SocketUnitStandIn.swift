import Foundation
import TransferPOSIX

/// What a systemd socket unit does for `transferd`, done by the test: it holds the container's
/// listening socket across the daemon's deaths, and when a connection waits and no daemon
/// runs, starts one with that socket as descriptor 3 (`LISTEN_FDS=1`, `LISTEN_PID` its own
/// pid, set by `sh` just before it execs the daemon, as systemd sets it after its fork).
/// Used from the test's thread only.
final class SocketUnitStandIn {
    let listener: FileDescriptor
    let container: TestContainer

    init(_ container: TestContainer) throws {
        self.container = container
        listener = try UnixSocket.listen(at: container.layout.daemonSocket.path)
    }

    deinit { listener.close() }

    /// Waits (with a deadline) until a client's connection waits on the socket, then starts
    /// `transferd` with it; nil when none came.
    func startDaemonOnNextConnection(timeout: TimeInterval, arguments: [String]) throws -> RunningProcess? {
        var waiting = pollfd(fd: listener.rawValue, events: Int16(POLLIN), revents: 0)
        guard poll(&waiting, 1, Int32(timeout * 1000)) == 1 else { return nil }
        let shell = Executable(name: "sh", path: "/bin/sh")
        return try shell.start(["-c", "export LISTEN_PID=$$; exec \"$0\" \"$@\"", Executable.transferd.path, "--container", container.root] + arguments,
                               in: container, environment: ["LISTEN_FDS": "1", "LISTEN_FDNAMES": "transferd.socket"], passContainer: false, passing: [listener])
    }
}
