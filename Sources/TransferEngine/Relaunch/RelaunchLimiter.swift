import Foundation
import TransferContainer

/// A containing app the daemon launched to take a session's events.
struct Launch {
    var pid: Int32
    var identifier: SessionIdentifier
    var at: Date
    /// Killed for exceeding its background budget (waiting to be reaped).
    var terminated = false
    /// It opened the session it was launched for: its exit is no failed relaunch.
    var attached = false
}

/// The resume rate limiter of one app (S6.5): each background relaunch doubles the delay
/// before the next; a user launch, or a quiet period as long as the delay, resets it.
struct RelaunchLimiter: Codable, Equatable {
    var delay: TimeInterval
    var lastLaunch: Date

    /// The limiter after a background relaunch at `now` (one that started or one that could
    /// not): twice the previous delay, or `initialDelay` for the first.
    static func afterRelaunch(_ previous: RelaunchLimiter?, initialDelay: TimeInterval, at now: Date) -> RelaunchLimiter {
        RelaunchLimiter(delay: previous.map { $0.delay * 2 } ?? initialDelay, lastLaunch: now)
    }

    func allowsLaunch(at now: Date) -> Bool { now.timeIntervalSince(lastLaunch) >= delay }

    /// A quiet period of twice the delay with no relaunch: the limiter starts over (S6.5).
    func hasLapsed(at now: Date) -> Bool { now.timeIntervalSince(lastLaunch) >= 2 * delay }
}
