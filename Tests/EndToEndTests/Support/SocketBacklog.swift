import Foundation
import TransferPOSIX

/// What a test can learn, without sleeping, about bytes it sent on a socket: whether the
/// peer has read them. Used to wait for "the daemon has read what is in flight" as an event.
enum SocketBacklog {
    /// Bytes sent on `fd` that the peer has not read yet (`SIOCOUTQ`); 0 once a closed
    /// connection has nothing left.
    static func unreadBytes(_ fd: FileDescriptor) -> Int32 {
        var queued: Int32 = 0
        return ioctl(fd.rawValue, UInt(TIOCOUTQ), &queued) == 0 ? queued : 0
    }

    /// Waits up to 100 ms for any of `fds` to take more bytes (the peer read some).
    static func waitUntilWritable(_ fds: [FileDescriptor]) {
        var entries = fds.map { pollfd(fd: $0.rawValue, events: Int16(POLLOUT), revents: 0) }
        _ = poll(&entries, nfds_t(entries.count), 100)
    }

    /// Waits until the peer has read everything sent on `fds` (or closed them), or until
    /// `timeout` passes; returns whether it had.
    @discardableResult
    static func waitUntilRead(_ fds: [FileDescriptor], timeout: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let waiting = fds.filter { unreadBytes($0) > 0 }
            if waiting.isEmpty { return true }
            if Date() > deadline { return false }
            waitUntilWritable(waiting)
        }
    }

    /// Waits until the peer has closed each of `fds` (a read finds the end, or a reset), or
    /// until `timeout` passes; returns how many it had closed. What the peer sent is drained.
    static func waitUntilClosed(_ fds: [FileDescriptor], timeout: TimeInterval = 20) -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        var open = fds
        while !open.isEmpty && Date() < deadline {
            var entries = open.map { pollfd(fd: $0.rawValue, events: Int16(POLLIN), revents: 0) }
            _ = poll(&entries, nfds_t(entries.count), 100)
            open = open.filter { !isClosedByPeer($0) }
        }
        return fds.count - open.count
    }

    /// Whether the peer closed `fd`: what waits is drained, then a read finds the end or a reset.
    private static func isClosedByPeer(_ fd: FileDescriptor) -> Bool {
        var drain = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = drain.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 { continue }
            return n == 0 || errno == ECONNRESET || errno == EPIPE
        }
    }
}
