import Foundation

/// Relaunches that can never succeed, for one app family: a launch that cannot start (its
/// executable is gone, say) or a launched process that exits without opening the session it
/// was launched for counts as a failure; after `failuresBeforeGivingUp` in a row the daemon
/// stops relaunching the app until the user launches it (its events stay durable and wait for
/// that launch), as after a force quit. Kept in the app registry (durable, and read by
/// `inspect`); changed on the daemon's loop thread only, with the time of the daemon's clock.
struct RelaunchGiveUp: Codable, Equatable {
    static let failuresBeforeGivingUp = 3

    /// Failed relaunches in a row.
    private(set) var failures = 0
    /// When the daemon gave up relaunching the app (nil: it has not).
    private(set) var gaveUpAt: Date?

    var hasGivenUp: Bool { gaveUpAt != nil }

    /// Counts a failed relaunch at `now`. Returns true when this failure is the one that
    /// makes the daemon give up (once: later failures, which should not happen, return false).
    mutating func failed(at now: Date) -> Bool {
        failures = min(failures + 1, Self.failuresBeforeGivingUp)
        guard gaveUpAt == nil, failures >= Self.failuresBeforeGivingUp else { return false }
        gaveUpAt = now
        return true
    }
}
