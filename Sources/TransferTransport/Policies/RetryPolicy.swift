import Foundation
import TransferContainer
import HTTPFormats

/// The one answer to "which responses are retried, after how long, until when" (S6.4):
/// - a `503` or `429` with a usable `Retry-After` (seconds, or an HTTP date) is tried again
///   after it (`serverWait`); without one, or any other status, it is the task's answer (S2.5);
/// - network trouble (refused, dropped, idle timeout: `retryableCodes`) is retried with a
///   backoff that doubles from `initialBackoff` up to `maximumBackoff`; other transport
///   failures end the task at once with their own code;
/// - a chain that fails a transfer yet verifies in the trust probe (a balancer with one
///   misconfigured backend) is retried with the same backoff, `trustDisagreementsBeforeFailing`
///   times, then the task ends with -1202;
/// - none of these waits past the task's resource deadline (`timeoutIntervalForResource`
///   from its creation): a retry that would start after it ends the task now with -1001.
/// `decision(after:…)` applies all of it to a `RetryCause`. Also how many times a resumable
/// upload's server may disagree about the offset (409) before the upload starts over. A
/// value; the daemon asks, the policy answers from the time it is given. The client
/// library's reconnection to a restarted daemon waits by the same rule (`reconnect`).
package struct RetryPolicy: Sendable {
    /// Statuses by which a server asks to be asked again later, retried after their `Retry-After`.
    package static let comeBackLaterStatuses: Set<Int> = [429, 503]

    /// Failures that are network trouble (refused, dropped, idle timeout): retried.
    package static let retryableCodes: Set<Int> = [TransferFailure.cannotConnectToHost, TransferFailure.networkConnectionLost, TransferFailure.timedOut]

    package var initialBackoff: TimeInterval
    package var maximumBackoff: TimeInterval
    /// 409s in a row after which a resumable upload starts over from zero.
    package var offsetConflictsBeforeRestart: Int

    /// Transfers refused for an untrusted chain that the probe then found trusted, after which
    /// the task ends with -1202: five waits of the ordinary backoff (about 8 s by default).
    package var trustDisagreementsBeforeFailing: Int

    package init(initialBackoff: TimeInterval = 0.25, maximumBackoff: TimeInterval = 30, offsetConflictsBeforeRestart: Int = 3, trustDisagreementsBeforeFailing: Int = 5) {
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.offsetConflictsBeforeRestart = offsetConflictsBeforeRestart
        self.trustDisagreementsBeforeFailing = trustDisagreementsBeforeFailing
    }

    /// What to do after a failed attempt.
    package enum Decision: Equatable {
        /// Try again, not before this time.
        case retry(notBefore: Date)
        /// The task ends with this error code (-1001 when its resource deadline comes first).
        case fail(code: Int)
    }

    /// How a client waits between attempts to reach a daemon that went away: from 50 ms,
    /// doubling, to once a second, for as long as a session is open.
    package static let reconnect = RetryPolicy(initialBackoff: 0.05, maximumBackoff: 1)

    /// Whether a response is a request to come back later rather than the task's answer:
    /// the cause to retry by, or nil.
    package static func serverWait(status: Int, retryAfter value: String?, now: Date) -> RetryCause? {
        guard comeBackLaterStatuses.contains(status), let value, let seconds = retryAfterSeconds(value, now: now) else { return nil }
        return .serverAskedToWait(status: status, seconds: seconds)
    }

    /// A `Retry-After` value (RFC 9110 §10.2.3: digits, or an HTTP date) as seconds within
    /// `CheckedNumbers.intervals`: any count of digits is a number (99999999999999999999 is
    /// the largest interval, not a trap); a date in the past is 0; anything else (a sign,
    /// an exponent, "nan") is nil.
    package static func retryAfterSeconds(_ value: String, now: Date) -> TimeInterval? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            let seconds = Double(text) ?? CheckedNumbers.intervals.upperBound // digits only: never nil in practice
            return CheckedNumbers.clamp(seconds, to: CheckedNumbers.intervals)
        }
        guard let seconds = HTTPDate.parse(text) else { return nil }
        return CheckedNumbers.clamp(Double(seconds) - now.timeIntervalSince1970, to: CheckedNumbers.intervals)
    }

    /// What to do after attempt `attempt` of a task met `cause`.
    package func decision(after cause: RetryCause, attempt: Int, createdAt: Date, resourceTimeout: TimeInterval, now: Date) -> Decision {
        switch cause {
        case .serverAskedToWait(_, let seconds): afterServiceUnavailable(retryAfter: seconds, createdAt: createdAt, resourceTimeout: resourceTimeout, now: now)
        case .networkTrouble(let code, _): afterTransportFailure(code: code, retry: attempt, createdAt: createdAt, resourceTimeout: resourceTimeout, now: now)
        case .trustDisagreement(_, _, let count): afterTrustDisagreement(count, createdAt: createdAt, resourceTimeout: resourceTimeout, now: now)
        case .unrecorded: afterTransportFailure(code: TransferFailure.networkConnectionLost, retry: attempt, createdAt: createdAt, resourceTimeout: resourceTimeout, now: now)
        }
    }

    /// The task's resource deadline.
    package func deadline(createdAt: Date, resourceTimeout: TimeInterval) -> Date {
        createdAt.addingTimeInterval(resourceTimeout)
    }

    /// The wait before retry number `retry` (1 for the first).
    package func backoff(beforeRetry retry: Int) -> TimeInterval {
        min(maximumBackoff, initialBackoff * pow(2, Double(min(max(retry, 1) - 1, 30))))
    }

    /// After a transport failure with `code`, the task's `retry`-th.
    package func afterTransportFailure(code: Int, retry: Int, createdAt: Date, resourceTimeout: TimeInterval, now: Date) -> Decision {
        guard Self.retryableCodes.contains(code) else { return .fail(code: code) }
        guard now < deadline(createdAt: createdAt, resourceTimeout: resourceTimeout) else { return .fail(code: TransferFailure.timedOut) }
        return .retry(notBefore: now.addingTimeInterval(backoff(beforeRetry: retry)))
    }

    /// After the `disagreements`-th transfer whose chain failed while the probe's verified:
    /// retried with the backoff of network trouble, up to the bound, then -1202.
    package func afterTrustDisagreement(_ disagreements: Int, createdAt: Date, resourceTimeout: TimeInterval, now: Date) -> Decision {
        guard disagreements <= trustDisagreementsBeforeFailing else { return .fail(code: TransferFailure.serverCertificateUntrusted) }
        guard now < deadline(createdAt: createdAt, resourceTimeout: resourceTimeout) else { return .fail(code: TransferFailure.timedOut) }
        return .retry(notBefore: now.addingTimeInterval(backoff(beforeRetry: disagreements)))
    }

    /// After a server asked to come back in `delay` seconds (`serverWait`): a time
    /// past the resource deadline ends the task now, as it would end then.
    package func afterServiceUnavailable(retryAfter delay: TimeInterval, createdAt: Date, resourceTimeout: TimeInterval, now: Date) -> Decision {
        let start = now.addingTimeInterval(CheckedNumbers.clamp(delay, to: CheckedNumbers.intervals))
        guard start < deadline(createdAt: createdAt, resourceTimeout: resourceTimeout) else { return .fail(code: TransferFailure.timedOut) }
        return .retry(notBefore: start)
    }

    /// How long a task waits for an attached app to refresh its headers before a retry.
    package var freshHeadersWait: TimeInterval { 10 }

    /// Whether the app is asked for fresh headers (a new token) before `task` starts: when the
    /// start retries or resumes an earlier attempt (ours, not Apple's).
    package func asksForFreshHeaders(before task: TaskRecord) -> Bool {
        task.retryCount > 0 || task.progressBytes.done > 0 || task.uploadResumption != nil || task.authenticationFailures > 0
    }

    /// Whether a resumable upload whose server answered 409 to `conflicts` offset requests
    /// in a row (this one included) starts over instead of asking for the offset again.
    package func restartsUpload(afterOffsetConflicts conflicts: Int) -> Bool {
        conflicts > offsetConflictsBeforeRestart
    }
}
