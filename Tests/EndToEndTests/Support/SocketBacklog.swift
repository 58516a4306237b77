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
}
