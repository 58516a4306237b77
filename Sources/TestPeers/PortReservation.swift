import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A free TCP port on 127.0.0.1, held for a peer that binds it itself (nginx): a socket bound
/// there with `SO_REUSEADDR` and not listening. While it is held the kernel gives the port to
/// no other `bind` to port 0, in this process or another, yet a peer that sets `SO_REUSEADDR`
/// (nginx does, on every listening socket) may still bind and listen on it. A port picked and
/// released at once could be picked again by a peer started at the same moment: two nginx
/// were then given one port, the second failed to bind, and its tests talked to the first.
/// Released by `release()` once the peer listens, or at deinit. Used by one thread.
package final class PortReservation {
    package let port: Int
    private var fd: Int32

    package init() throws {
        (fd, port) = try PeerProcess.boundToFreeLoopbackPort(reusingAddress: true, what: "port reservation")
    }

    /// Lets the port go (the peer listens on it by now). Idempotent.
    package func release() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    deinit { release() }
}
