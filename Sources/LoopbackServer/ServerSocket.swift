import Glibc

/// A failed socket system call: which call, and the `errno` it left.
/// Thrown by `LoopbackServer.init` when the listener cannot be set up.
public struct SocketError: Error, CustomStringConvertible, Sendable {
    /// The system call that failed, e.g. `bind`.
    public let operation: String
    /// The `errno` it left.
    public let code: Int32

    init(_ operation: String, code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }

    /// The call, `strerror`'s words and the number.
    public var description: String {
        "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// A socket file descriptor with thin typed wrappers over the calls the server makes.
///
/// A plain value: it does not close itself. Whoever created it owns the number and closes
/// it exactly once; connection sockets are closed under the server lock (see `ServerCore`)
/// so `stop()` can never shut down a number the kernel has already handed out again.
/// Reads and writes on a connection happen only on that connection's thread.
struct SocketFD: Sendable, Hashable {
    let raw: Int32

    /// Creates a listening TCP socket on 127.0.0.1 on `port` (0: a kernel-chosen one).
    static func listenOnLoopback(port: UInt16 = 0, backlog: Int32 = 512) throws -> (socket: SocketFD, port: UInt16) {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError("socket") }
        let socket = SocketFD(raw: fd)

        var address = loopbackAddress(port: port)
        if port != 0 {
            // A port a test just freed: its closed connections must not keep it.
            var reuse: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { let e = SocketError("bind"); socket.close(); throw e }
        guard Glibc.listen(fd, backlog) == 0 else { let e = SocketError("listen"); socket.close(); throw e }

        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { let e = SocketError("getsockname"); socket.close(); throw e }
        return (socket, UInt16(bigEndian: address.sin_port))
    }

    /// What one `accept` produced.
    enum AcceptResult {
        case connection(SocketFD)
        /// Interrupted or the peer gave up before we accepted: just try again.
        case retry
        case failed(Int32)
    }

    func accept() -> AcceptResult {
        let fd = Glibc.accept(raw, nil, nil)
        if fd >= 0 {
            // accept4 is not visible to Swift; mark close-on-exec right away so processes
            // the tests spawn do not inherit connections.
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            return .connection(SocketFD(raw: fd))
        }
        switch errno {
        case EINTR, ECONNABORTED, EPROTO: return .retry
        case let code: return .failed(code)
        }
    }

    /// Reads what is available (blocking until something is). Returns 0 at end of stream.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n = recv(raw, buffer.baseAddress, buffer.count, 0)
            if n >= 0 { return n }
            if errno != EINTR { throw SocketError("recv") }
        }
    }

    /// Sends some of `bytes`; returns how many the kernel took. `more` says further data
    /// follows at once (MSG_MORE), so a response head and its body share packets.
    /// MSG_NOSIGNAL: a vanished peer is an error, not SIGPIPE.
    func sendSome(_ bytes: UnsafeRawBufferPointer, more: Bool = false) throws -> Int {
        let flags = Int32(MSG_NOSIGNAL) | (more ? Int32(MSG_MORE) : 0)
        while true {
            let n = Glibc.send(raw, bytes.baseAddress, bytes.count, flags)
            if n >= 0 { return n }
            if errno != EINTR { throw SocketError("send") }
        }
    }

    func sendAll(_ bytes: UnsafeRawBufferPointer, more: Bool = false) throws {
        var offset = 0
        while offset < bytes.count {
            offset += try sendSome(UnsafeRawBufferPointer(rebasing: bytes[offset...]), more: more)
        }
    }

    func sendAll(_ bytes: [UInt8], more: Bool = false) throws {
        try bytes.withUnsafeBytes { try sendAll($0, more: more) }
    }

    /// Copies up to `count` bytes of `file` from `offset` straight from the page cache to
    /// the socket (sendfile(2)), advancing `offset`. Returns 0 if the file ended early.
    func sendFile(_ file: Int32, offset: inout off_t, count: Int) throws -> Int {
        while true {
            let n = Glibc.sendfile(raw, file, &offset, count)
            if n >= 0 { return n }
            if errno != EINTR { throw SocketError("sendfile") }
        }
    }

    /// Wakes any thread blocked in accept/recv/send on this socket; they then see an
    /// error or end of stream. Safe to call from any thread while the number is owned.
    func shutdown(_ how: Int32 = Int32(SHUT_RDWR)) {
        _ = Glibc.shutdown(raw, how)
    }

    func close() {
        _ = Glibc.close(raw)
    }

    /// 127.0.0.1:`port`.
    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }

    /// Connects to 127.0.0.1:`port` and hangs up: wakes a thread blocked in `accept` on the
    /// socket listening there, whatever became of the descriptor it was called with.
    static func knock(port: UInt16) {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { _ = Glibc.close(fd) }
        var address = loopbackAddress(port: port)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Small responses go out at once instead of waiting for the peer's delayed ACK.
    func setNoDelay() {
        var on: Int32 = 1
        _ = setsockopt(raw, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bounds how long a blocking `recv` waits; afterwards it fails with EAGAIN.
    func setReceiveTimeout(seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(raw, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
}
