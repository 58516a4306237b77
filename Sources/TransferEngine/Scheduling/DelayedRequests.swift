import Foundation
import TransferContainer
import TransferLogging

/// What delayed requests need of the rest of the daemon: asking the app, judging the request
/// it gives instead, ending the task it cancels, and the scheduler's attention.
/// `TransferDaemon` answers (`TransferDaemon+DelayedRequestSurroundings.swift`).
protocol DelayedRequestSurroundings: AnyObject {
    /// Puts a question to the session's holder, once per holder (`EventDelivery.askHolder`).
    func askHolder(_ asked: inout [TaskKey: AskedHolder], _ key: TaskKey, in session: DaemonSession,
                   now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> EventDelivery.HolderQuestion
    /// Why a request the app gives instead cannot be sent (as a new task's would be refused).
    func refusal(of creation: TaskCreation) -> TransferFailure?
    /// Keeps the body of the request the app gives instead, for a download (`Downloads`); why it cannot.
    func replaceRequestBody(with body: NewRequestBody, of task: inout TaskRecord, in session: DaemonSession) -> TransferFailure?
    /// Ends a task with a failure (its event queued).
    func failTask(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure)
    /// Ends a task the app cancelled.
    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure) throws
    /// An answer may let a task start: the scheduler looks at every task at the end of the turn.
    func requestScheduling()
}

/// Delayed requests (S5.1): a task with an `earliestBeginDate` whose date has come asks the
/// attached app `willBeginDelayedRequest` before it starts. Owned by the daemon's loop thread.
final class DelayedRequests {
    private unowned let surroundings: any DelayedRequestSurroundings
    private let log: TransferLog
    /// Tasks whose holder was asked `willBeginDelayedRequest` (see `askHolder`).
    var delayedRequestsAsked: [TaskKey: AskedHolder] = [:]

    init(surroundings: any DelayedRequestSurroundings, log: TransferLog) {
        self.surroundings = surroundings
        self.log = log
    }

    /// How long an attached app has to answer `willBeginDelayedRequest` before the task
    /// goes on as asked at creation.
    static let delayedRequestAnswerTimeout: TimeInterval = 30


    /// A task with an `earliestBeginDate` whose date has come: the attached app is asked
    /// `willBeginDelayedRequest` first (nil while it decides); with nobody attached, or no
    /// answer in time, it goes on as created. Returns the task as it may start.
    func readyAfterDelayedRequest(_ task: TaskRecord, in session: DaemonSession, now: Date) -> TaskRecord? {
        guard task.earliestBeginDate != nil, !task.delayedRequestAnswered else { return task }
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        switch surroundings.askHolder(&delayedRequestsAsked, key, in: session, now: now, timeout: Self.delayedRequestAnswerTimeout, .delayedRequest(session: session.key.identifier, task)) {
        case .asked:
            log.info("transfers", "earliestBeginDate reached; asking willBeginDelayedRequest", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return nil
        case .waiting:
            return nil
        case .overdue:
            log.error("transfers", "no answer to willBeginDelayedRequest within \(Int(Self.delayedRequestAnswerTimeout)) s; continuing", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        case .nobodyAttached:
            break
        }
        var ready = task
        ready.delayedRequestAnswered = true
        session.update(ready)
        return ready
    }

    /// The app's answer to `willBeginDelayedRequest`: go on, go on with another request, or
    /// cancel. Taken only while the question is open: an answer after the task went on
    /// (overdue, or never asked) changes nothing, so a request body is replaced once at most.
    func answerDelayedRequest(_ answer: DelayedRequestAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        guard var task = session.tasks[taskID] else { return nil } // ended meanwhile
        let key = TaskKey(session: session.key, task: taskID)
        guard delayedRequestsAsked.removeValue(forKey: key) != nil, !task.delayedRequestAnswered else {
            log.notice("transfers", "an answer to willBeginDelayedRequest that was not asked for (or came too late); ignored", session: session.key.identifier.rawValue, task: taskID)
            return task
        }
        task.delayedRequestAnswered = true
        switch answer {
        case .continueLoading:
            session.update(task)
            log.info("transfers", "willBeginDelayedRequest: continue loading", session: session.key.identifier.rawValue, task: taskID)
        case .useNewRequest(let request, let body):
            // The rules of a new task: its URL and headers, and a download's body (S5.1).
            let isDownload = task.kind == .download
            if let refusal = TransferLimits.refusal(of: request) ?? surroundings.refusal(of: TaskCreation(kind: task.kind, request: request))
                ?? (isDownload ? body.refusal(url: request.url) : nil)
                ?? (isDownload ? surroundings.replaceRequestBody(with: body, of: &task, in: session) : nil) {
                surroundings.failTask(task, in: session, refusal)
                return nil
            }
            task.replacementRequest = request
            session.update(task)
            log.notice("transfers", "willBeginDelayedRequest: using a new request for \(request.url)", session: session.key.identifier.rawValue, task: taskID)
        case .cancel:
            try surroundings.cancelTask(taskID, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled in willBeginDelayedRequest"))
            return nil
        }
        surroundings.requestScheduling()
        return session.tasks[taskID]
    }

    /// The task ended: no answer is awaited any more.
    func forget(_ key: TaskKey) {
        delayedRequestsAsked[key] = nil
    }
}
