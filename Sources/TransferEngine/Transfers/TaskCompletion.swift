internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// Carries out what `TaskLifecycle` decides of how a task ends or goes on after an attempt
/// (a retry held and woken, S6.4; the resource deadline; the completion event made durable
/// before it is delivered), and ends tasks on request (cancel, invalidation). Owned by the
/// daemon's loop thread.
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
    /// ends now, as `TaskLifecycle` decides.
    func retryOrFail(_ task: TaskRecord, in session: DaemonSession, after cause: RetryCause) {
        transferEnded(task, .mayRetry(cause), in: session)
    }

    /// An attempt of `task` came to `outcome`: what `TaskLifecycle` makes of it is carried out.
    func transferEnded(_ task: TaskRecord, _ outcome: TransferOutcome, in session: DaemonSession) {
        carryOut(daemon.lifecycle.onTransferEnded(task, outcome: outcome, resourceTimeout: session.record.configuration.timeoutIntervalForResource, now: daemon.clock.now), in: session)
    }

    /// Carries out the lifecycle's decisions about tasks of `session`.
    func carryOut(_ actions: [LifecycleAction], in session: DaemonSession) {
        var stopped: Set<Int> = []
        for action in actions {
            switch action {
            case .hold(let task, let hold):
                session.update(task)
                let wait = if case .retry(let attempt, let start, let cause) = hold {
                    "\(cause); retry \(attempt) in \(String(format: "%.2f", max(0, start.timeIntervalSince(daemon.clock.now)))) s"
                } else { "\(hold)" }
                daemon.log.notice("transfers", wait, session: session.key.identifier.rawValue, task: task.taskIdentifier, hold: hold)
            case .wake(let date):
                daemon.loop.schedule(at: date) { [unowned self] in daemon.scheduler.scheduleTransfers() }
            case .stopTransfer(let identifier):
                daemon.transfers.stopTransfer(TaskKey(session: session.key, task: identifier))
                stopped.insert(identifier)
            case .end(let ended, let ending):
                // A stopped transfer wrote what it learnt (counts, validator) into the record.
                let task = stopped.contains(ended.taskIdentifier) ? session.tasks[ended.taskIdentifier] ?? ended : ended
                switch ending {
                case .downloaded(let file):
                    end(task, in: session, downloadedFile: file, note: "finished: HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesReceived) bytes")
                case .uploaded(let body):
                    if end(task, in: session, responseBody: body, note: "finished: HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesSent) bytes sent") {
                        daemon.transfers.removeTransferFiles(of: task, in: session) // the daemon's copy of the body goes
                    }
                case .failed(var failure, let keepsResumeData):
                    if keepsResumeData { failure.resumeData = daemon.resumeData.makeResumeData(for: task, in: session) } // S6.2
                    fail(task, in: session, failure)
                }
            case .resetLimiter, .relaunch, .terminate:
                break // the relauncher's
            }
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
                let actions = daemon.lifecycle.onTimer(task, resourceTimeout: budget, now: now)
                if actions.isEmpty { // not past it, or suspended (looked at again when resumed)
                    let deadline = daemon.retryPolicy.deadline(createdAt: task.createdAt, resourceTimeout: budget)
                    if deadline >= now { next = min(next, deadline) }
                    continue
                }
                carryOut(actions, in: session)
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
