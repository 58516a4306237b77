import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Small pieces the real test peers (nginx, openssl) share: running a command to its end with
/// a deadline, a listening loopback socket, waiting for a port to accept (a port held for a
/// peer that binds it itself is `PortReservation`). Any thread.
package enum PeerProcess {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String

        package init(description: String) { self.description = description }
    }

    /// Runs `executable` to its end (killed by its pid at the deadline); throws with its
    /// output when it fails.
    @discardableResult
    package static func run(_ executable: String, _ arguments: [String], in directory: URL, timeout: TimeInterval = 30) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let output = directory.appendingPathComponent(".\((executable as NSString).lastPathComponent)-\(UUID().uuidString.prefix(8)).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close(); try? FileManager.default.removeItem(at: output) }
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            _ = exited.wait(timeout: .now() + 5)
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) did not finish in \(timeout) s")
        }
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus): \(text)")
        }
        return text
    }

    /// A listening TCP socket on a free 127.0.0.1 port (close-on-exec), and the port; `what`
    /// names the peer in errors.
    static func listenOnLoopback(backlog: Int32, what: String) throws -> (fd: Int32, port: Int) {
        let (fd, port) = try boundToFreeLoopbackPort(reusingAddress: false, what: what)
        guard listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw Failure(description: "\(what) listen on 127.0.0.1:\(port): errno \(code)")
        }
        return (fd, port)
    }

    /// A TCP socket (close-on-exec) bound to a port of 127.0.0.1 the kernel picks, not yet
    /// listening, and the port; with `SO_REUSEADDR` set first when `reusingAddress`. `what`
    /// names its user in errors.
    static func boundToFreeLoopbackPort(reusingAddress: Bool, what: String) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "\(what) socket: errno \(errno)") }
        var reuse: Int32 = 1
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = (!reusingAddress || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size)) == 0)
            && withUnsafePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }) == 0
            && withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
        guard bound else {
            let code = errno
            close(fd)
            throw Failure(description: "\(what) bind on 127.0.0.1: errno \(code)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Whether something accepts connections on 127.0.0.1:`port` now.
    package static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }

    /// Waits until `condition` holds, checking every 10 ms, or the deadline passes; returns whether it held.
    package static func wait(until deadline: Date, _ condition: () -> Bool) -> Bool {
        while !condition() {
            if Date() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// 127.0.0.1:`port` as a socket address.
    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
