import Foundation
import TransferPOSIX

/// The service manager's end of the notify protocol, as a test holds it: an AF_UNIX datagram
/// socket bound at a path, read with deadlines. Used from the test's thread only.
final class NotifyListener {
    let path: String
    private let fd: Int32
    /// Every datagram read so far, in order.
    private(set) var received: [String] = []

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Errno.current("socket") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw Errno(ENAMETOOLONG, "bind", path: path) }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard bound == 0 else { throw Errno.current("bind", path: path) }
    }

    deinit { close(fd) }

    /// Reads datagrams until one satisfies `matches` (returned) or the deadline passes (nil).
    func next(timeout: TimeInterval, where matches: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&waiting, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) == 1 else { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { continue }
            let message = String(decoding: buffer[0..<n], as: UTF8.self)
            received.append(message)
            if matches(message) { return message }
        }
        return nil
    }
}
