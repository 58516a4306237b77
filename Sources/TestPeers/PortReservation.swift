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
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw PeerProcess.Failure(description: "socket: errno \(errno)") }
        var reuse: Int32 = 1
        var address = PeerProcess.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let reserved = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size)) == 0
            && withUnsafePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }) == 0
            && withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
        guard reserved else {
            let code = errno
            close(fd)
            throw PeerProcess.Failure(description: "reserving a port on 127.0.0.1: errno \(code)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Lets the port go (the peer listens on it by now). Idempotent.
    package func release() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
    }

    deinit { release() }
}
