#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// An exclusive `flock` on a file, held for as long as this object lives.
///
/// The kernel releases it when the process dies, however it dies: that is what makes it
/// the right tool for "one process per session" and "one daemon per container".
/// The holder writes its pid into the file so that a refused process can name it.
public final class FileLock: Sendable {
    public let path: String
    private let descriptor: FileDescriptor

    private init(path: String, descriptor: FileDescriptor) {
        self.path = path
        self.descriptor = descriptor
    }

    /// The outcome of a non-blocking attempt.
    public enum Attempt: Sendable {
        case acquired(FileLock)
        /// Another process holds it; its pid, when it wrote one.
        case heldByOther(pid: Int32?)
    }

    /// Tries once to take the lock (`LOCK_EX | LOCK_NB`); never waits.
    public static func tryAcquire(_ path: String) throws(Errno) -> Attempt {
        let fd = try FileDescriptor.open(path, O_RDWR | O_CREAT)
        if flock(fd.rawValue, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            fd.close()
            guard code == EWOULDBLOCK else { throw Errno(code, "flock", path: path) }
            return .heldByOther(pid: holderPID(path))
        }
        // Record ourselves as the holder (for error messages and `bgtransfer inspect`).
        try? fd.truncate(to: 0)
        _ = try? fd.seek(to: 0)
        // As bytes: `Data` made from a UTF-8 view searches the conformances at run time.
        Array("\(getpid())\n".utf8).withUnsafeBytes { _ = try? fd.writeAll($0) }
        return .acquired(FileLock(path: path, descriptor: fd))
    }

    /// The pid written by the current holder, if the file names a live holder.
    public static func holderPID(_ path: String) -> Int32? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        return pid
    }

    /// Whether some process holds the lock right now (probes with a non-blocking shared lock).
    public static func isHeld(_ path: String) -> Bool {
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return false }
        defer { fd.close() }
        if flock(fd.rawValue, LOCK_SH | LOCK_NB) == 0 {
            _ = flock(fd.rawValue, LOCK_UN)
            return false
        }
        return true
    }

    /// Releases the lock now rather than at deinit.
    public func release() {
        _ = flock(descriptor.rawValue, LOCK_UN)
    }

    deinit {
        descriptor.close()
    }
}
