internal import Glibc
import Foundation
import TransferPOSIX

/// The listening socket a service manager handed over (systemd's socket activation, as
/// `sd_listen_fds(3)` defines it: `LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`, descriptors
/// from 3). Read once, at start, on the main thread, before any other thread exists.
public enum SocketActivation {
    /// The first descriptor passed (`SD_LISTEN_FDS_START`).
    static let firstDescriptor: Int32 = 3

    /// The inherited socket that listens at `path`, or nil when nothing was passed (or the
    /// variables are meant for another process: `LISTEN_PID` is not ours). The variables are
    /// removed from the environment either way, so that no app the daemon launches sees them,
    /// and every passed descriptor becomes close-on-exec. Throws when descriptors were passed
    /// but none is a listening AF_UNIX stream socket bound to `path`: serving another socket
    /// would leave the container's clients unanswered.
    public static func listener(for path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(SocketActivationError) -> FileDescriptor? {
        defer { for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) } }
        guard let pidText = environment["LISTEN_PID"], let countText = environment["LISTEN_FDS"] else { return nil }
        guard let pid = Int32(pidText), pid == getpid() else { return nil }
        guard let count = Int32(countText), (1...1024).contains(count) else {
            throw .badVariable("LISTEN_FDS=\(countText.prefix(40))")
        }
        let names = environment["LISTEN_FDNAMES"]?.split(separator: ":", omittingEmptySubsequences: false).map(String.init) ?? []
        var found: FileDescriptor?
        var seen: [String] = []
        for offset in 0..<count {
            let fd = firstDescriptor + offset
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let name = Int(offset) < names.count ? names[Int(offset)] : "fd \(fd)"
            switch describe(fd) {
            case .listening(let bound) where sameFile(bound, path):
                if found == nil { found = FileDescriptor(rawValue: fd) } else { close(fd) }
            case .listening(let bound):
                seen.append("\(name): listening at \(bound)")
                close(fd)
            case .other(let what):
                seen.append("\(name): \(what)")
                close(fd)
            }
        }
        guard let found else { throw .noMatchingSocket(path: path, passed: seen) }
        found.setNonBlocking()
        return found
    }

    private enum Kind {
        case listening(String)
        case other(String)
    }

    /// What descriptor `fd` is: a listening AF_UNIX stream socket and its path, or what else.
    private static func describe(_ fd: Int32) -> Kind {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        guard let domain = option(SO_DOMAIN) else { return .other("not a socket") }
        guard domain == AF_UNIX else { return .other("not an AF_UNIX socket (family \(domain))") }
        guard option(SO_TYPE) == Int32(SOCK_STREAM.rawValue) else { return .other("not a stream socket") }
        guard option(SO_ACCEPTCONN) == 1 else { return .other("a socket that does not listen") }
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return .other("a socket without a name") }
        let path = withUnsafeBytes(of: &address.sun_path) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
        guard path.hasPrefix("/") else { return .other("an abstract or unnamed socket") }
        return .listening(path)
    }

    /// Whether two paths name one file (symbolic links in either resolved).
    private static func sameFile(_ a: String, _ b: String) -> Bool {
        URL(fileURLWithPath: a).resolvingSymlinksInPath().path == URL(fileURLWithPath: b).resolvingSymlinksInPath().path
    }
}

/// Why the sockets a service manager passed cannot be served.
public enum SocketActivationError: Error, CustomStringConvertible, Equatable {
    case badVariable(String)
    /// None of the passed descriptors listens at `path`; `passed` says what each one was.
    case noMatchingSocket(path: String, passed: [String])

    public var description: String {
        switch self {
        case .badVariable(let text):
            "the service manager passed an unreadable \(text)"
        case .noMatchingSocket(let path, let passed):
            "none of the sockets the service manager passed listens at the container's \(path) (\(passed.joined(separator: "; "))); check ListenStream= in the socket unit"
        }
    }
}
