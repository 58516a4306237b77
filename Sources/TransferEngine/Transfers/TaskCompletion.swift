internal import Glibc
import Foundation
import TransferContainer
import TransferTransport
import TransferLogging

/// What task completion sees of the rest of the daemon (on the loop thread): the sessions,
/// the scheduler's look at the queue, delivery to holders, and the parts that keep something
/// of a task in memory. `TransferDaemon` answers (`TransferDaemon+TaskCompletionSurroundings.swift`).
protocol TaskCompletionSurroundings: AnyObject {
    var sessions: [SessionKey: DaemonSession] { get }
    /// The earliest resource deadline of a task the scheduler has queued: nothing to look
    /// at before it. Kept by the scheduler, moved on here after each look.
    var nextResourceDeadline: Date { get set }
    /// A chain that does not verify goes to the app to judge (S3.6, `ServerTrustChallenges`).
    func serverTrustFailed(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError)
    /// The scheduler looks at this task again: held for a retry, it parks until its date.
    func requestScheduling(of task: TaskRecord, in session: DaemonSession)
    /// A push (`invalidated`) for the holder of `session`.
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession)
    /// The session's events not yet pushed go to its holder, once durable.
    func announcePendingEvents(_ session: DaemonSession)
    /// A task ended: its delayed request, challenge, trust question and dated hold are dropped.
    func forgetRequestsAndChallenges(of key: TaskKey)
}

/// Carries out what `TaskLifecycle` decides of how a task ends or goes on after an attempt
/// (a retry held and woken, S6.4; the resource deadline; the completion event made durable
/// before it is delivered), and ends tasks on request (cancel, invalidation). Owned by the
/// daemon's loop thread.
final class TaskCompletion {
    private unowned let surroundings: any TaskCompletionSurroundings
    private let transfers: RunningTransfers
    private let resumeData: ResumeDataStore
    private let lifecycle: TaskLifecycle
    private let log: TransferLog
    private let clock: any TimeSource

    init(surroundings: any TaskCompletionSurroundings, transfers: RunningTransfers, resumeData: ResumeDataStore,
         lifecycle: TaskLifecycle, log: TransferLog, clock: any TimeSource) {
        self.surroundings = surroundings
        self.transfers = transfers
        self.resumeData = resumeData
        self.lifecycle = lifecycle
        self.log = log
        self.clock = clock
    }

    /// A transport failure: a chain that does not verify goes to the app (S3.6); anything
    /// else is tried again or ends the task, as the retry policy decides (S6.4).
    func retryOrFail(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {
        if error.isServerTrustFailure {
            surroundings.serverTrustFailed(task, in: session, error) // the app judges the chain (S3.6)
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
        carryOut(lifecycle.onTransferEnded(task, outcome: outcome, resourceTimeout: session.record.configuration.timeoutIntervalForResource, now: clock.now), in: session)
    }

    /// Carries out the lifecycle's decisions about tasks of `session`.
    func carryOut(_ actions: [LifecycleAction], in session: DaemonSession) {
        var stopped: Set<Int> = []
        for action in actions {
            switch action {
            case .hold(let task, let hold):
                session.update(task)
                surroundings.requestScheduling(of: task, in: session) // parked until its date
                let wait = if case .retry(let attempt, let start, let cause) = hold {
                    "\(cause); retry \(attempt) in \(String(format: "%.2f", max(0, start.timeIntervalSince(clock.now)))) s"
                } else { "\(hold)" }
                log.notice("transfers", wait, session: session.key.identifier.rawValue, task: task.taskIdentifier, hold: hold)
            case .wake:
                break // the scheduler wakes the task it parked (`DatedHolds`), alone
            case .stopTransfer(let identifier):
                transfers.stopTransfer(TaskKey(session: session.key, task: identifier))
                stopped.insert(identifier)
            case .end(let ended, let ending):
                // A stopped transfer wrote what it learnt (counts, validator) into the record.
                let task = stopped.contains(ended.taskIdentifier) ? session.tasks[ended.taskIdentifier] ?? ended : ended
                switch ending {
                case .downloaded(let file):
                    end(task, in: session, downloadedFile: file, note: "finished: HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesReceived) bytes")
                case .uploaded(let body):
                    if end(task, in: session, responseBody: body, note: "finished: HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesSent) bytes sent") {
                        transfers.removeTransferFiles(of: task, in: session) // the daemon's copy of the body goes
                    }
                case .failed(var failure, let keepsResumeData):
                    if keepsResumeData { failure.resumeData = resumeData.makeResumeData(for: task, in: session) } // S6.2
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
            transfers.removeTransferFiles(of: task, in: session)
        }
    }

    /// Ends a task for good: its completion event is made durable, then delivered to the
    /// holder; `note` is logged. Returns false when the event could not be recorded (the
    /// task then stays, to be ended at the next start).
    @discardableResult
    func end(_ task: TaskRecord, in session: DaemonSession, downloadedFile: String? = nil, error: TransferFailure? = nil, responseBody: Data? = nil, note: String) -> Bool {
        do {
            _ = try session.complete(task, downloadedFile: downloadedFile, error: error, responseBody: responseBody, at: clock.now)
            forgetTask(TaskKey(session: session.key, task: task.taskIdentifier))
        } catch let storeError {
            log.error("store", "cannot record the end of the task (\(note)): \(storeError)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return false
        }
        if error == nil {
            log.notice("transfers", note, session: session.key.identifier.rawValue, task: task.taskIdentifier)
        } else {
            log.error("transfers", note, session: session.key.identifier.rawValue, task: task.taskIdentifier)
        }
        surroundings.announcePendingEvents(session)
        finishInvalidationIfDone(session)
        return true
    }

    /// Tasks whose whole budget is spent end with -1001 (S5 `timeoutIntervalForResource`).
    /// Returns whether it looked at every task (the next deadline is then known).
    @discardableResult
    func enforceResourceTimeouts(now: Date) -> Bool {
        guard now >= surroundings.nextResourceDeadline else { return false }
        var next = Date.distantFuture
        for session in surroundings.sessions.values {
            let budget = session.record.configuration.timeoutIntervalForResource
            let tasks = session.tasks // a copy: carrying out an action changes the session's
            tasks.forEachRecord { task in
                let actions = lifecycle.onTimer(task, resourceTimeout: budget, now: now)
                if actions.isEmpty { // not past it, or suspended (looked at again when resumed)
                    let deadline = lifecycle.retryPolicy.deadline(createdAt: task.createdAt, resourceTimeout: budget)
                    if deadline >= now { next = min(next, deadline) }
                    return
                }
                carryOut(actions, in: session)
            }
        }
        surroundings.nextResourceDeadline = next
        return true
    }

    /// Ends a task with a failure (cancel, invalidation, force quit): an event stays; its
    /// partial data goes, or becomes resume data (returned, and put in the error, S6.2).
    @discardableResult
    func cancel(_ taskID: Int, in session: DaemonSession, failure: TransferFailure, keepResumeData: Bool = false) throws -> Data? {
        guard session.tasks[taskID] != nil else { return nil }
        let key = TaskKey(session: session.key, task: taskID)
        transfers.stopTransfer(key)
        let task = session.tasks[taskID]!
        var failure = failure
        if keepResumeData { failure.resumeData = resumeData.makeResumeData(for: task, in: session) }
        _ = try session.complete(task, downloadedFile: nil, error: failure, at: clock.now)
        transfers.removeTransferFiles(of: task, in: session)
        forgetTask(key)
        log.notice("tasks", "ended: \(failure.message)\(failure.resumeData == nil ? "" : " (resume data kept)")", session: session.key.identifier.rawValue, task: taskID)
        surroundings.announcePendingEvents(session)
        return failure.resumeData
    }

    /// Sends `invalidated` once an invalidating session has no task left (S1.4).
    func finishInvalidationIfDone(_ session: DaemonSession) {
        guard session.invalidateWhenDone, session.tasks.isEmpty, session.holder != nil else { return }
        surroundings.pushToHolder(.invalidated(session: session.key.identifier, nil), of: session)
        // The holder keeps the session until it lets go (closeSession, after acknowledging the
        // events it was handed) or goes away: let go of now, the events its delegate has seen
        // would stay unacknowledged and the app be relaunched for them.
        log.notice("sessions", "invalidated", session: session.key.identifier.rawValue)
    }

    /// A task ended: what the daemon kept in memory for it goes.
    func forgetTask(_ key: TaskKey) {
        surroundings.forgetRequestsAndChallenges(of: key)
    }
}
