import Foundation
import TransferContainer

/// Which failed attempts of a task are tried again, and when (S6.4): network trouble is
/// retried with a backoff that doubles from `initialBackoff` up to `maximumBackoff`; a `503`
/// is retried after its `Retry-After`; neither goes past the task's resource deadline
/// (`timeoutIntervalForResource` from its creation), where the task fails with -1001; other
/// failures end the task at once. Also how many times a resumable upload's server may
/// disagree about the offset (409) before the upload starts over. A value; the daemon asks,
/// the policy answers from the time it is given.
struct RetryPolicy: Sendable {
    /// Failures that are network trouble (refused, dropped, idle timeout): retried.
    static let retryableCodes: Set<Int> = [TransferFailure.cannotConnectToHost, TransferFailure.networkConnectionLost, TransferFailure.timedOut]

    var initialBackoff: TimeInterval = 0.25
    var maximumBackoff: TimeInterval = 30
    /// 409s in a row after which a resumable upload starts over from zero.
    var offsetConflictsBeforeRestart = 3

    /// What to do after a failed attempt.
    enum Decision: Equatable {
        /// Try again, not before this time.
        case retry(notBefore: Date)
        /// The task ends with this error code (-1001 when its resource deadline comes first).
        case fail(code: Int)
    }

    /// The task's resource deadline.
    func deadline(createdAt: Date, resourceTimeout: TimeInterval) -> Date {
        createdAt.addingTimeInterval(resourceTimeout)
    }

    /// The wait before retry number `retry` (1 for the first).
    func backoff(beforeRetry retry: Int) -> TimeInterval {
        min(maximumBackoff, initialBackoff * pow(2, Double(min(max(retry, 1) - 1, 30))))
    }

    /// After a transport failure with `code`, the task's `retry`-th.
    func afterTransportFailure(code: Int, retry: Int, createdAt: Date, resourceTimeout: TimeInterval, now: Date) -> Decision {
        guard Self.retryableCodes.contains(code) else { return .fail(code: code) }
        guard now < deadline(createdAt: createdAt, resourceTimeout: resourceTimeout) else { return .fail(code: TransferFailure.timedOut) }
        return .retry(notBefore: now.addingTimeInterval(backoff(beforeRetry: retry)))
    }

    /// After a server asked to come back in `delay` seconds (`503` + `Retry-After`): a time
    /// past the resource deadline ends the task now, as it would end then.
    func afterServiceUnavailable(retryAfter delay: TimeInterval, createdAt: Date, resourceTimeout: TimeInterval, now: Date) -> Decision {
        let start = now.addingTimeInterval(CheckedNumbers.clamp(delay, to: CheckedNumbers.intervals))
        guard start < deadline(createdAt: createdAt, resourceTimeout: resourceTimeout) else { return .fail(code: TransferFailure.timedOut) }
        return .retry(notBefore: start)
    }

    /// Whether a resumable upload whose server answered 409 to `conflicts` offset requests
    /// in a row (this one included) starts over instead of asking for the offset again.
    func restartsUpload(afterOffsetConflicts conflicts: Int) -> Bool {
        conflicts > offsetConflictsBeforeRestart
    }
}
