#if canImport(Glibc)
import Glibc
#endif
import CPOSIX

/// A pidfd: a handle on one process that, unlike its pid, never comes to mean another
/// process once this one has exited and its number is reused. Owned; closed explicitly.
public struct ProcessHandle: Sendable {
    public let pid: Int32
    public let descriptor: FileDescriptor

    public init(pid: Int32, descriptor: FileDescriptor) {
        self.pid = pid
        self.descriptor = descriptor
    }

    /// A handle on the process that has the number `pid` now (`pidfd_open`).
    public static func open(pid: Int32) throws(Errno) -> ProcessHandle {
        let fd = cposix_pidfd_open(pid)
        guard fd >= 0 else { throw .current("pidfd_open") }
        return ProcessHandle(pid: pid, descriptor: FileDescriptor(rawValue: fd))
    }

    /// False once the process has exited (zombie or reaped): its number may name another by now.
    public var isRunning: Bool { cposix_pidfd_running_after(descriptor.rawValue, 0) == 1 }

    /// Waits until the process exits or `seconds` pass (whichever is first), without polling:
    /// true if it has exited. Its status is still there for `wait4` when it is a child.
    public func waitForExit(within seconds: Double) -> Bool {
        let bounded = seconds.isNaN ? 0 : min(max(0, seconds), 86_400) // poll takes an Int32 of milliseconds
        let milliseconds = Int32((bounded * 1000).rounded(.up))
        return cposix_pidfd_running_after(descriptor.rawValue, milliseconds) == 0
    }

    public func close() { descriptor.close() }
}
