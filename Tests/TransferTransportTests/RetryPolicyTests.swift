import Foundation
import Testing
import TransferContainer
@testable import TransferTransport

/// The retry policy (S6.4) on its own, with the time given: no waiting.
@Suite struct RetryPolicyTests {
    let policy = RetryPolicy()
    let created = Date(timeIntervalSince1970: 1_700_000_000)

    @Test("Backoff doubles from 0.25 s and stops growing at 30 s, whatever the retry count")
    func backoffGrowth() {
        #expect((1...9).map { policy.backoff(beforeRetry: $0) } == [0.25, 0.5, 1, 2, 4, 8, 16, 30, 30])
        #expect(policy.backoff(beforeRetry: Int(Int32.max)) == 30)
        #expect(policy.backoff(beforeRetry: 0) == 0.25 && policy.backoff(beforeRetry: -5) == 0.25)
    }

    @Test("A client reaching for a restarted daemon waits 50 ms, doubling, and then once a second for good")
    func reconnectBackoff() {
        let waits = (1...8).map { RetryPolicy.reconnect.backoff(beforeRetry: $0) }
        #expect(waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1, 1, 1])
        #expect(RetryPolicy.reconnect.backoff(beforeRetry: Int.max) == 1)
    }

    @Test("Fresh headers are asked for before a retry, a resume, a resumed upload or after a refused credential, never before a first attempt")
    func freshHeaders() {
        var task = TaskRecord(taskIdentifier: 1, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/x"))
        #expect(!policy.asksForFreshHeaders(before: task))
        task.retryCount = 1
        #expect(policy.asksForFreshHeaders(before: task))
        task.retryCount = 0
        task.countOfBytesReceived = 10
        #expect(policy.asksForFreshHeaders(before: task))
        task.countOfBytesReceived = 0
        task.authenticationFailures = 1
        #expect(policy.asksForFreshHeaders(before: task))
    }

    @Test("Network trouble is retried after the backoff; other failures end the task at once with their own code")
    func whatRetries() {
        let now = created.addingTimeInterval(10)
        for code in [TransferFailure.cannotConnectToHost, TransferFailure.networkConnectionLost, TransferFailure.timedOut] {
            #expect(policy.afterTransportFailure(code: code, retry: 3, createdAt: created, resourceTimeout: 600, now: now) == .retry(notBefore: now.addingTimeInterval(1)))
        }
        for code in [-1003, -1200, TransferFailure.badURL, TransferFailure.cannotWriteToFile, TransferFailure.unknown, -1007] {
            #expect(policy.afterTransportFailure(code: code, retry: 1, createdAt: created, resourceTimeout: 600, now: now) == .fail(code: code))
        }
    }

    @Test("Retries stop at the resource deadline: -1001 from then on")
    func resourceDeadline() {
        let code = TransferFailure.networkConnectionLost
        #expect(policy.afterTransportFailure(code: code, retry: 1, createdAt: created, resourceTimeout: 60, now: created.addingTimeInterval(59.9)) == .retry(notBefore: created.addingTimeInterval(60.15)))
        #expect(policy.afterTransportFailure(code: code, retry: 1, createdAt: created, resourceTimeout: 60, now: created.addingTimeInterval(60)) == .fail(code: TransferFailure.timedOut))
        #expect(policy.afterTransportFailure(code: code, retry: 1, createdAt: created, resourceTimeout: 60, now: created.addingTimeInterval(1e6)) == .fail(code: TransferFailure.timedOut))
    }

    @Test("Retry-After: waited out within the deadline; past it, or absurd, the task ends now")
    func serviceUnavailable() {
        let now = created.addingTimeInterval(5)
        #expect(policy.afterServiceUnavailable(retryAfter: 10, createdAt: created, resourceTimeout: 60, now: now) == .retry(notBefore: now.addingTimeInterval(10)))
        #expect(policy.afterServiceUnavailable(retryAfter: 0, createdAt: created, resourceTimeout: 60, now: now) == .retry(notBefore: now))
        #expect(policy.afterServiceUnavailable(retryAfter: 55, createdAt: created, resourceTimeout: 60, now: now) == .fail(code: TransferFailure.timedOut))
        for absurd in [Double.infinity, .greatestFiniteMagnitude, 9.3e18] {
            #expect(policy.afterServiceUnavailable(retryAfter: absurd, createdAt: created, resourceTimeout: 7 * 86_400, now: now) == .fail(code: TransferFailure.timedOut))
        }
        #expect(policy.afterServiceUnavailable(retryAfter: .nan, createdAt: created, resourceTimeout: 60, now: now) == .retry(notBefore: now), "NaN waits nothing")
    }

    @Test("503 and 429 with a Retry-After in seconds or as an HTTP date ask to be tried again later; without one, or any other status, the response is the answer")
    func whichResponsesWait() {
        let now = Date(timeIntervalSince1970: 1_700_000_000) // Tue, 14 Nov 2023 22:13:20 GMT
        for status in [503, 429] {
            #expect(RetryPolicy.serverWait(status: status, retryAfter: "7", now: now) == .serverAskedToWait(status: status, seconds: 7))
            #expect(RetryPolicy.serverWait(status: status, retryAfter: "Tue, 14 Nov 2023 22:13:50 GMT", now: now) == .serverAskedToWait(status: status, seconds: 30))
            #expect(RetryPolicy.serverWait(status: status, retryAfter: nil, now: now) == nil)
            #expect(RetryPolicy.serverWait(status: status, retryAfter: "soon", now: now) == nil)
            let cause = RetryCause.serverAskedToWait(status: status, seconds: 7)
            #expect(policy.decision(after: cause, attempt: 4, createdAt: created, resourceTimeout: 600, now: now) == .retry(notBefore: now.addingTimeInterval(7)))
        }
        for status in [200, 404, 500, 502, 504] {
            #expect(RetryPolicy.serverWait(status: status, retryAfter: "7", now: now) == nil, "\(status)")
        }
    }

    @Test("A resumable upload asks for the offset again after a 409, and starts over after the fourth in a row")
    func offsetConflicts() {
        #expect((1...5).map(policy.restartsUpload(afterOffsetConflicts:)) == [false, false, false, true, true])
    }

    @Test("A chain that fails the transfer but verifies in the probe is retried with the network backoff five times, then -1202; the resource deadline still ends it first")
    func trustDisagreements() {
        let now = created.addingTimeInterval(5)
        let waits = (1...5).map { policy.afterTrustDisagreement($0, createdAt: created, resourceTimeout: 60, now: now) }
        #expect(waits == [0.25, 0.5, 1, 2, 4].map { .retry(notBefore: now.addingTimeInterval($0)) })
        #expect(policy.afterTrustDisagreement(6, createdAt: created, resourceTimeout: 60, now: now) == .fail(code: TransferFailure.serverCertificateUntrusted))
        #expect(policy.afterTrustDisagreement(1, createdAt: created, resourceTimeout: 4, now: now) == .fail(code: TransferFailure.timedOut))
    }
}
