import Foundation

/// The recent speed of one transfer: bytes per second over the last few seconds of samples,
/// so that one stall or burst does not swing the figure. A value owned by whoever draws the
/// progress (the watch tool's loop, a stand-in's progress bar behind its lock).
public struct TransferRate: Sendable {
    /// How far back samples count, in seconds.
    public let window: TimeInterval
    private var samples: [(time: TimeInterval, bytes: Int64)] = []

    public init(window: TimeInterval = 3) {
        self.window = window
    }

    /// Records `bytes` done at `time` (seconds on a monotonic clock, e.g. `systemUptime`).
    public mutating func add(bytes: Int64, at time: TimeInterval) {
        // Fewer bytes than before: the transfer started over, and older samples mean nothing.
        if let last = samples.last, bytes < last.bytes || time < last.time { samples.removeAll() }
        samples.append((time, bytes))
        // Keep one sample at or before the window's start, so sparse samples still give a rate.
        while samples.count > 2 && samples[1].time <= time - window { samples.removeFirst() }
    }

    /// Bytes per second across the window; nil until samples span a fifth of a second.
    public var bytesPerSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.time - first.time >= 0.2 else { return nil }
        return Double(last.bytes - first.bytes) / (last.time - first.time)
    }
}
