internal import Glibc
import Foundation
import TransferPOSIX

/// The daemon's end of systemd's notify protocol (`sd_notify(3)`): datagrams such as
/// `READY=1` sent to the socket `NOTIFY_SOCKET` names (a path, or an abstract name written
/// `@name`). Made once at start from the environment, immutable after (sendto on a datagram
/// socket is safe from any thread); the daemon's loop thread sends.
public final class ServiceNotifier: @unchecked Sendable {
    private let socket: FileDescriptor
    private let address: sockaddr_un
    private let addressLength: socklen_t
    /// What `NOTIFY_SOCKET` said, for errors.
    public let name: String
    /// How often the service manager wants `WATCHDOG=1` (`WATCHDOG_USEC`), when it does.
    public let watchdogInterval: TimeInterval?

    /// The notifier `environment` asks for, or nil when `NOTIFY_SOCKET` is not set. Removes
    /// the protocol's variables from this process's environment, so that the apps the daemon
    /// launches do not speak for it. Throws when the name cannot be a socket address.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(Errno) -> ServiceNotifier? {
        defer { for name in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { unsetenv(name) } }
        guard let name = environment["NOTIFY_SOCKET"], !name.isEmpty else { return nil }
        var watchdog: TimeInterval?
        // WATCHDOG_PID, when set, says which process the watchdog is meant for.
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 {
            watchdog = TimeInterval(microseconds) / 1_000_000
        }
        return try ServiceNotifier(name: name, watchdogInterval: watchdog)
    }

    public init(name: String, watchdogInterval: TimeInterval?) throws(Errno) {
        self.name = name
        self.watchdogInterval = watchdogInterval
        var bytes = Array(name.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        guard abstract || bytes.first == UInt8(ascii: "/") else { throw Errno(EAFNOSUPPORT, "NOTIFY_SOCKET", path: name) }
        if abstract { bytes[0] = 0 } // an abstract name starts with a NUL byte and has none at its end
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw Errno(ENAMETOOLONG, "NOTIFY_SOCKET", path: name) }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        self.address = address
        addressLength = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .current("socket", path: name) }
        socket = FileDescriptor(rawValue: fd)
    }

    deinit { socket.close() }

    /// Sends one state datagram (`READY=1`, `STATUS=…`, newline-separated assignments),
    /// without waiting: a manager that does not read (its queue holds ten datagrams) must not
    /// stop the daemon's loop. Throws `EAGAIN` when the datagram was dropped for that.
    public func send(_ state: String) throws(Errno) {
        let bytes = Array(state.utf8)
        var address = address
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                bytes.withUnsafeBytes { Glibc.sendto(socket.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), target, addressLength) }
            }
        }
        guard sent == bytes.count else { throw .current("sendto", path: name) }
    }
}
