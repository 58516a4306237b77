#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`), typed: read it, and raise
/// the soft limit as far as the hard one allows. Process-wide state, read and changed by
/// whoever starts the process (the daemon, once, before it opens anything of a client's).
public struct DescriptorLimit: Equatable, Sendable, CustomStringConvertible {
    /// What `open`, `accept` and the like may reach: the next descriptor fails with `EMFILE`.
    public var soft: UInt64
    /// How far an unprivileged process may raise `soft`.
    public var hard: UInt64

    /// `RLIM_INFINITY` on Linux (all bits set; the C macro does not import into Swift).
    public static let unlimited = UInt64.max

    public init(soft: UInt64, hard: UInt64) {
        self.soft = soft
        self.hard = hard
    }

    /// The limits in force now.
    public static func current() throws(Errno) -> DescriptorLimit {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw Errno.current("getrlimit(RLIMIT_NOFILE)") }
        return DescriptorLimit(soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one (a process started by another inherits that
    /// one's soft limit, often 1,024) and returns the limits now in force. `RLIM_INFINITY`
    /// as the hard limit is not a number the kernel takes for descriptors: then the soft
    /// limit goes to the kernel's most (`/proc/sys/fs/nr_open`), or stays.
    @discardableResult
    public static func raiseSoftToHard() throws(Errno) -> DescriptorLimit {
        let before = try current()
        var target = before.hard
        if target == Self.unlimited { target = kernelMaximum() ?? before.soft }
        guard target > before.soft else { return before }
        var limit = rlimit(rlim_cur: rlim_t(target), rlim_max: rlim_t(before.hard))
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw Errno.current("setrlimit(RLIMIT_NOFILE, \(target))") }
        return try current()
    }

    /// `/proc/sys/fs/nr_open`: the most descriptors the kernel lets one process have.
    private static func kernelMaximum() -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/nr_open", encoding: .utf8),
              let value = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0 else { return nil }
        return value
    }

    public var description: String {
        func text(_ value: UInt64) -> String { value == Self.unlimited ? "unlimited" : "\(value)" }
        return "\(text(soft)) (hard \(text(hard)))"
    }
}
