internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// How a task ends or goes on after a failed attempt: the retry policy applied (S6.4), the
/// resource deadline enforced, cancellation, and the completion event made durable before it
/// is delivered. Owned by the daemon's loop thread.
final class TaskCompletion {
    unowned let daemon: TransferDaemon

    init(daemon: TransferDaemon) {
        self.daemon = daemon
    }

    /// A transport failure: a chain that does not verify goes to the app (S3.6); anything
    /// else is tried again or ends the task, as the retry policy decides (S6.4).
    func retryOrFail(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {
        if error.isServerTrustFailure {
            daemon.serverTrust.trustFailed(task, in: session, error) // the app judges the chain (S3.6)
            return
        }
        retryOrFail(task, in: session, after: .networkTrouble(code: error.urlErrorCode, message: error.description))
    }

    /// A failed attempt met `cause`: the task is held until the retry the policy allows, or
    /// ends now (its own code, -1001 at the resource deadline, -1202 for servers that keep
    /// disagreeing about their chain).
    func retryOrFail(_ task: TaskRecord, in session: DaemonSession, after cause: RetryCause) {
        var task = task
        task.retryCount += 1
        task.lastError = cause.description
        task.retryCause = cause
        let now = daemon.clock.now
        switch daemon.retryPolicy.decision(after: cause, attempt: task.retryCount, createdAt: task.createdAt,
                                           resourceTimeout: session.record.configuration.timeoutIntervalForResource, now: now) {
        case .retry(let start):
            task.retryNotBefore = start
            session.update(task)
            daemon.loop.schedule(after: start.timeIntervalSince(now)) { [unowned self] in daemon.scheduler.scheduleTransfers() }
            daemon.log.notice("transfers", "\(cause); retry \(task.retryCount) in \(String(format: "%.2f", max(0, start.timeIntervalSince(now)))) s",
                              session: session.key.identifier.rawValue, task: task.taskIdentifier, hold: .retry(attempt: task.retryCount, at: start, cause: cause))
        case .fail(let code):
            var failure = TransferFailure(code: code, message: failureMessage(code: code, after: cause), subject: task.originalRequest.url)
            if code == TransferFailure.timedOut { failure.resumeData = daemon.resumeData.makeResumeData(for: task, in: session) } // S6.2
            if code == TransferFailure.serverCertificateUntrusted { failure.failingURL = task.requestToSend.url }
            fail(task, in: session, failure)
        }
    }

    /// What a task that `cause` ends with `code` is told.
    private func failureMessage(code: Int, after cause: RetryCause) -> String {
        switch cause {
        case .networkTrouble(let failed, let message) where failed == code: message
        case .trustDisagreement: "The certificate for this server is invalid (\(cause); its servers disagree)"
        // Asked to come back after the task's whole budget is spent: it ends now as it would then.
        default: "The request timed out (\(cause); the resource timeout ends first)"
        }
    }

    /// Ends a task with an error; its partial data goes once the end is durable.
    func fail(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure) {
        if end(task, in: session, error: failure, note: "failed: \(failure.message)") {
            daemon.transfers.removeTransferFiles(of: task, in: session)
        }
    }

    /// Ends a task for good: its completion event is made durable, then delivered to the
    /// holder; `note` is logged. Returns false when the event could not be recorded (the
    /// task then stays, to be ended at the next start).
    @discardableResult
    func end(_ task: TaskRecord, in session: DaemonSession, downloadedFile: String? = nil, error: TransferFailure? = nil, responseBody: Data? = nil, note: String) -> Bool {
        do {
            _ = try session.complete(task, downloadedFile: downloadedFile, error: error, responseBody: responseBody, at: daemon.clock.now)
            forgetTask(TaskKey(session: session.key, task: task.taskIdentifier))
        } catch let storeError {
            daemon.log.error("store", "cannot record the end of the task (\(note)): \(storeError)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return false
        }
        if error == nil {
            daemon.log.notice("transfers", note, session: session.key.identifier.rawValue, task: task.taskIdentifier)
        } else {
            daemon.log.error("transfers", note, session: session.key.identifier.rawValue, task: task.taskIdentifier)
        }
        daemon.delivery.pushPendingEvents(session)
        finishInvalidationIfDone(session)
        return true
    }

    /// Tasks whose whole budget is spent end with -1001 (S5 `timeoutIntervalForResource`).
    func enforceResourceTimeouts(now: Date) {
        guard now >= daemon.scheduler.nextResourceDeadline else { return }
        var next = Date.distantFuture
        for session in daemon.sessions.values {
            let budget = session.record.configuration.timeoutIntervalForResource
            for task in session.tasks.values {
                let deadline = task.createdAt.addingTimeInterval(budget)
                guard now > deadline else {
                    next = min(next, deadline)
                    continue
                }
                guard task.state == .running else { continue } // looked at again when resumed
                daemon.transfers.stopTransfer(TaskKey(session: session.key, task: task.taskIdentifier))
                let current = session.tasks[task.taskIdentifier] ?? task
                var failure = TransferFailure(code: TransferFailure.timedOut, message: "The request timed out (resource timeout of \(String(format: "%.0f", budget)) s)", subject: task.originalRequest.url)
                failure.resumeData = daemon.resumeData.makeResumeData(for: current, in: session) // S6.2
                fail(current, in: session, failure)
            }
        }
        daemon.scheduler.nextResourceDeadline = next
    }

    /// Ends a task with a failure (cancel, invalidation, force quit): an event stays; its
    /// partial data goes, or becomes resume data (returned, and put in the error, S6.2).
    @discardableResult
    func cancel(_ taskID: Int, in session: DaemonSession, failure: TransferFailure, keepResumeData: Bool = false) throws -> Data? {
        guard session.tasks[taskID] != nil else { return nil }
        let key = TaskKey(session: session.key, task: taskID)
        daemon.transfers.stopTransfer(key)
        let task = session.tasks[taskID]!
        var failure = failure
        if keepResumeData { failure.resumeData = daemon.resumeData.makeResumeData(for: task, in: session) }
        _ = try session.complete(task, downloadedFile: nil, error: failure, at: daemon.clock.now)
        daemon.transfers.removeTransferFiles(of: task, in: session)
        forgetTask(key)
        daemon.log.notice("tasks", "ended: \(failure.message)\(failure.resumeData == nil ? "" : " (resume data kept)")", session: session.key.identifier.rawValue, task: taskID)
        daemon.delivery.pushPendingEvents(session)
        return failure.resumeData
    }

    /// Sends `invalidated` once an invalidating session has no task left (S1.4).
    func finishInvalidationIfDone(_ session: DaemonSession) {
        guard session.invalidateWhenDone, session.tasks.isEmpty, session.holder != nil else { return }
        daemon.delivery.push(.invalidated(session: session.key.identifier, nil), to: session)
        // The holder keeps the session until it lets go (closeSession, after acknowledging the
        // events it was handed) or goes away: let go of now, the events its delegate has seen
        // would stay unacknowledged and the app be relaunched for them.
        daemon.log.notice("sessions", "invalidated", session: session.key.identifier.rawValue)
    }

    /// A task ended: what the daemon kept in memory for it goes.
    func forgetTask(_ key: TaskKey) {
        daemon.delayedRequests.forget(key)
        daemon.challenges.forget(key)
        daemon.serverTrust.forget(key)
    }
}
