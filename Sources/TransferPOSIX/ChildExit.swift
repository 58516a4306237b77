import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The exit of a child process this process spawned: one thread of its own reaps it
/// (`waitpid`) and records how it ended; any thread may ask or wait, behind one condition
/// lock. Used by the test tools that start real processes.
public final class ChildExit: @unchecked Sendable {
    public let pid: Int32
    private let exit = NSCondition()
    private var status: Int32?

    /// Starts waiting for the child `pid`. No one else may reap it.
    public init(pid: Int32) {
        self.pid = pid
        let waiter = Thread { [self, pid] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            // The exit code, or the number of the signal that ended it (as Foundation's terminationStatus).
            let code = raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
            exit.withLock {
                status = code
                exit.broadcast()
            }
        }
        waiter.start()
    }

    /// Whether it has not been reaped yet.
    public var isRunning: Bool { exit.withLock { status == nil } }

    /// The exit code (or ending signal) once it has exited within `timeout`; nil otherwise.
    public func wait(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        exit.lock()
        defer { exit.unlock() }
        while status == nil && exit.wait(until: deadline) {}
        return status
    }

    /// Runs `body` while the child is not reaped, holding the lock the reaper takes, so that
    /// its pid cannot become another process's meanwhile (a zombie keeps its number).
    public func whileNotReaped(_ body: (Int32) -> Void) {
        exit.withLock { if status == nil { body(pid) } }
    }
}
