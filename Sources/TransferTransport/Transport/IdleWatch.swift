#if canImport(Glibc)
internal import Glibc
#endif

/// A transfer's idle timeout (`timeoutIntervalForRequest`, S6.4): whether no byte has moved
/// either way for longer than `timeout`. Checked from libcurl's progress callback, which runs
/// at least every time the handle is driven. A value owned by its `CurlEasy`, on the
/// event-loop thread.
struct IdleWatch {
    /// The longest the exchange may go without a byte moving; nil: no limit.
    var timeout: Double?
    /// When a byte last moved (monotonic seconds), and the counts progress last reported.
    private var lastActivity: Double = 0
    private var lastCounts: (downloaded: Int64, uploaded: Int64) = (0, 0)

    /// A byte moved, or the transfer paused on purpose: the clock starts again.
    mutating func noteActivity() {
        lastActivity = Self.monotonicSeconds()
    }

    /// A new run of the handle: nothing counted yet.
    mutating func restart() {
        lastCounts = (0, 0)
        noteActivity()
    }

    /// Whether the exchange has been idle past `timeout`, given the counts progress reports
    /// now. A change in the counts, or a pause of our own (waiting on ourselves is not idle),
    /// starts the clock again.
    mutating func hasExpired(downloaded: Int64, uploaded: Int64, paused: Bool) -> Bool {
        if (downloaded, uploaded) != lastCounts || paused {
            lastCounts = (downloaded, uploaded)
            noteActivity()
            return false
        }
        guard let timeout else { return false }
        return Self.monotonicSeconds() - lastActivity > timeout
    }

    private static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
