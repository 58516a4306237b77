#if canImport(Glibc)
import Glibc
#endif
import Foundation
import CPOSIX

/// Thin typed wrappers for the Unix-domain stream socket between clients and the daemon.
public enum UnixSocket {
    /// The kernel's word on who is at the other end (`SO_PEERCRED`).
    public struct PeerCredentials: Sendable, Equatable {
        public var pid: Int32
        public var uid: UInt32
        public var gid: UInt32
    }

    /// Who wrote bytes the daemon read: the kernel's word for each read (`SCM_CREDENTIALS`),
    /// with a handle on that very process when the kernel gives one (`SCM_PIDFD`).
    public struct Writer: Sendable {
        public var pid: Int32
        public var uid: UInt32
        /// Owned by whoever received it.
        public var process: ProcessHandle?
    }

    /// What one read brought: bytes, and who wrote them (nil when the kernel did not say).
    public struct Received: Sendable {
        public var byteCount: Int
        public var writer: Writer?
    }

    /// Asks the kernel to say, with every read from `fd`, which process wrote the bytes
    /// (`SO_PASSCRED`) and, if `handles`, to hand over a pidfd of it (`SO_PASSPIDFD`, Linux
    /// 6.5 and later; older kernels give credentials only). Set on a listener, accepted
    /// connections inherit it, bytes written before the accept included.
    public static func identifyWriters(_ fd: FileDescriptor, handles: Bool) throws(Errno) {
        guard cposix_pass_credentials(fd.rawValue, handles ? 1 : 0) == 0 else { throw .current("setsockopt SO_PASSCRED") }
    }

    /// Reads what is there, without blocking, up to `buffer.count` bytes, all of them written
    /// by one process (a stream socket with `SO_PASSCRED` on never joins two writers' bytes in
    /// one read): 0 bytes at end of stream; throws `EAGAIN` when nothing waits.
    public static func receive(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Received {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var pidfd: Int32 = -1
        let n = retryingOnInterrupt { cposix_receive_with_writer(fd.rawValue, buffer.baseAddress, buffer.count, &pid, &uid, &pidfd) }
        guard n >= 0 else { throw .current("recvmsg") }
        let process = pidfd >= 0 ? ProcessHandle(pid: pid, descriptor: FileDescriptor(rawValue: pidfd)) : nil
        guard pid > 0 else {
            process?.close()
            return Received(byteCount: n, writer: nil)
        }
        return Received(byteCount: n, writer: Writer(pid: pid, uid: uid, process: process))
    }

    /// Bytes the kernel holds for the next reads of `fd`.
    public static func pendingInputCount(_ fd: FileDescriptor) -> Int {
        max(0, Int(cposix_pending_input(fd.rawValue)))
    }

    /// Binds and listens at `path` (a stale socket file is replaced), mode 0600, non-blocking.
    public static func listen(at path: String, backlog: Int32 = 256) throws(Errno) -> FileDescriptor {
        let fd = try makeSocket()
        unlink(path)
        let result = withAddress(path) { address, length in Glibc.bind(fd.rawValue, address, length) }
        guard result == 0 else {
            let error = Errno.current("bind", path: path)
            fd.close()
            throw error
        }
        chmod(path, 0o600)
        guard Glibc.listen(fd.rawValue, backlog) == 0 else {
            let error = Errno.current("listen", path: path)
            fd.close()
            throw error
        }
        fd.setNonBlocking()
        return fd
    }

    /// Accepts one waiting connection (non-blocking); nil when none waits.
    public static func accept(_ listener: FileDescriptor) throws(Errno) -> FileDescriptor? {
        let fd = retryingOnInterrupt { cposix_accept_nonblocking(listener.rawValue) }
        if fd < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED { return nil }
            throw .current("accept")
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Connects to the socket at `path` (blocking).
    public static func connect(to path: String) throws(Errno) -> FileDescriptor {
        let fd = try makeSocket()
        let result = withAddress(path) { address, length in retryingOnInterrupt { Glibc.connect(fd.rawValue, address, length) } }
        guard result == 0 else {
            let error = Errno.current("connect", path: path)
            fd.close()
            throw error
        }
        return fd
    }

    public static func peerCredentials(_ fd: FileDescriptor) -> PeerCredentials? {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard cposix_peer_credentials(fd.rawValue, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    /// Sends every byte (blocking socket), without raising `SIGPIPE` if the peer is gone.
    public static func sendAll(_ fd: FileDescriptor, _ data: Data) throws(Errno) {
        let failure = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Errno? in
            var offset = 0
            while offset < raw.count {
                let n = retryingOnInterrupt { Glibc.send(fd.rawValue, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) }
                if n < 0 { return .current("send") }
                offset += n
            }
            return nil
        }
        if let failure { throw failure }
    }

    private static func makeSocket() throws(Errno) -> FileDescriptor {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .current("socket") }
        return FileDescriptor(rawValue: fd)
    }

    /// Calls `body` with a `sockaddr_un` for `path`. Paths longer than `sun_path` (108 bytes)
    /// go through `/proc/self/fd/<dir>/<name>`, which the kernel resolves to the same file.
    private static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var effective = path
        var directoryFD: Int32 = -1
        let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        if path.utf8.count >= capacity {
            let directory = (path as NSString).deletingLastPathComponent
            directoryFD = cposix_open_directory_path(directory)
            if directoryFD >= 0 { effective = "/proc/self/fd/\(directoryFD)/\((path as NSString).lastPathComponent)" }
        }
        defer { if directoryFD >= 0 { Glibc.close(directoryFD) } }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(effective.utf8.prefix(capacity - 1))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
