#if canImport(Glibc)
import Glibc
#endif

/// A POSIX error number, typed, with the operation and path it came from.
///
/// Thrown by the thin wrappers in this folder instead of raw `Int32`s.
public struct Errno: Error, Equatable, CustomStringConvertible, Sendable {
    public let code: Int32
    /// What was being done ("open", "flock", …).
    public let operation: String
    /// The file or socket path involved, when there is one.
    public let path: String?

    public init(_ code: Int32, _ operation: String, path: String? = nil) {
        self.code = code
        self.operation = operation
        self.path = path
    }

    /// The current `errno`, captured right after a failed call.
    public static func current(_ operation: String, path: String? = nil) -> Errno {
        Errno(errno, operation, path: path)
    }

    public var description: String {
        let reason = String(cString: strerror(code))
        if let path { return "\(operation) \(path): \(reason) (errno \(code))" }
        return "\(operation): \(reason) (errno \(code))"
    }

    public static let wouldBlock = EWOULDBLOCK
    public static let interrupted = EINTR
}

/// Retries a system call while it fails with `EINTR`.
@inline(__always)
func retryingOnInterrupt<T: FixedWidthInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result == -1 && errno == EINTR { continue }
        return result
    }
}
