import Foundation
import TransferPOSIX
import TransferContainer

/// A clock that moves only when told (`advance(by:)`): tests give it to the daemon's rules
/// and to an `EventLoop`, and make time pass instead of sleeping. Locked, since a
/// `TimeSource` is `Sendable`; any thread.
package final class ManualClock: TimeSource, @unchecked Sendable {
    private let time: Locked<Date>

    package init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) {
        time = Locked(start)
    }

    package var now: Date { time.withLock { $0 } }

    package func advance(by seconds: TimeInterval) {
        time.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}
