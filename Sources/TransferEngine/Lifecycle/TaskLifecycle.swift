import Foundation
import TransferContainer
import TransferTransport

/// The task lifecycle's rules as values: given a task, what happened to it and the time,
/// the actions the daemon is to carry out (`LifecycleAction`): retry and wait (by
/// `RetryPolicy`), the resource deadline, what a finished or failed transfer turns into,
/// and (`TaskLifecycle+Relaunch`) whom to relaunch and when. It holds no daemon, touches no
/// disk and reads no clock: the time is an argument, so its tests set it. A value; the
/// daemon keeps one (`TransferDaemon.lifecycle`) and asks it on the loop thread.
struct TaskLifecycle: Sendable {
    /// Which failed attempts are tried again, and when (S6.4).
    var retryPolicy: RetryPolicy
    /// The resume rate limiter's first delay between background relaunches of one app (S6.5).
    var relaunchDelay: TimeInterval
    /// How long an app launched for events may run before it is killed.
    var backgroundBudget: TimeInterval

    init(retryPolicy: RetryPolicy = RetryPolicy(), relaunchDelay: TimeInterval = 60, backgroundBudget: TimeInterval = 30) {
        self.retryPolicy = retryPolicy
        self.relaunchDelay = relaunchDelay
        self.backgroundBudget = backgroundBudget
    }

    /// A transfer attempt of `task` (in a session whose `timeoutIntervalForResource` is
    /// `resourceTimeout`) came to `outcome` at `now`: the task ends, or waits for a retry.
    func onTransferEnded(_ task: TaskRecord, outcome: TransferOutcome, resourceTimeout: TimeInterval, now: Date) -> [LifecycleAction] {
        switch outcome {
        case .downloaded(let file): [.end(task, .downloaded(file: file))]
        case .uploaded(let body): [.end(task, .uploaded(responseBody: body))]
        // Downloaded bytes that could not be written for want of space stay as resume data (S6.2).
        case .failed(let failure): [.end(task, .failed(failure, keepsResumeData: task.kind == .download && failure.code == TransferFailure.cannotWriteToFile))]
        case .mayRetry(let cause): afterFailedAttempt(task, cause: cause, resourceTimeout: resourceTimeout, now: now)
        }
    }

    /// A failed attempt met `cause`: the task is held until the retry the policy allows, or
    /// ends now (its own code, -1001 at the resource deadline, -1202 for servers that keep
    /// disagreeing about their chain).
    func afterFailedAttempt(_ task: TaskRecord, cause: RetryCause, resourceTimeout: TimeInterval, now: Date) -> [LifecycleAction] {
        var task = task
        task.retryCount += 1
        task.lastError = cause.description
        task.retryCause = cause
        switch retryPolicy.decision(after: cause, attempt: task.retryCount, createdAt: task.createdAt, resourceTimeout: resourceTimeout, now: now) {
        case .retry(let start):
            task.retryNotBefore = start
            return [.hold(task, .retry(attempt: task.retryCount, at: start, cause: cause)), .wake(at: start)]
        case .fail(let code):
            var failure = TransferFailure(code: code, message: Self.failureMessage(code: code, after: cause), subject: task.originalRequest.url)
            if code == TransferFailure.serverCertificateUntrusted { failure.failingURL = task.requestToSend.url }
            return [.end(task, .failed(failure, keepsResumeData: code == TransferFailure.timedOut))] // S6.2
        }
    }

    /// The clock reached `now`: a running task past its resource deadline stops and ends with
    /// -1001 and resume data (S5 `timeoutIntervalForResource`, S6.2). A suspended one is
    /// looked at again when resumed; none ends at the deadline itself, only past it.
    func onTimer(_ task: TaskRecord, resourceTimeout: TimeInterval, now: Date) -> [LifecycleAction] {
        guard task.state == .running, now > retryPolicy.deadline(createdAt: task.createdAt, resourceTimeout: resourceTimeout) else { return [] }
        let failure = TransferFailure(code: TransferFailure.timedOut, message: "The request timed out (resource timeout of \(String(format: "%.0f", resourceTimeout)) s)", subject: task.originalRequest.url)
        return [.stopTransfer(taskIdentifier: task.taskIdentifier), .end(task, .failed(failure, keepsResumeData: true))]
    }

    /// What a task that `cause` ends with `code` is told.
    private static func failureMessage(code: Int, after cause: RetryCause) -> String {
        switch cause {
        case .networkTrouble(let failed, let message) where failed == code: message
        case .trustDisagreement: "The certificate for this server is invalid (\(cause); its servers disagree)"
        // Asked to come back after the task's whole budget is spent: it ends now as it would then.
        default: "The request timed out (\(cause); the resource timeout ends first)"
        }
    }
}
