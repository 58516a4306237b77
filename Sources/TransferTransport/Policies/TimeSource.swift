import Foundation

/// Where the daemon's time-based rules read the time: the wall clock in the daemon, a clock a
/// test sets in unit tests of those rules (retry backoff, resource deadlines).
package protocol TimeSource: Sendable {
    var now: Date { get }
}

/// The wall clock.
package struct SystemTime: TimeSource {
    package var now: Date { Date() }

    package init() {}
}
