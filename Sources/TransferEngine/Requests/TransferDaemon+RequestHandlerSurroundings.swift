import Foundation
import TransferContainer

/// What the request handler may ask of the daemon (on the loop thread): each forwards to the
/// part that does it, so that the handler holds none of them.
extension TransferDaemon: RequestHandlerSurroundings {
    func startWatching(_ connection: ClientConnection, afterReply: inout [() -> Void]) -> DaemonReply {
        watchers.startWatching(connection, afterReply: &afterReply)
    }

    func deviceConditionsChanged() { scheduler.conditionsChanged() }

    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure, keepResumeData: Bool) throws -> Data? {
        try completion.cancel(taskID, in: session, failure: failure, keepResumeData: keepResumeData)
    }

    func finishInvalidationIfDone(_ session: DaemonSession) { completion.finishInvalidationIfDone(session) }

    func takeUploadBody(_ path: String?, into task: inout TaskRecord, in session: DaemonSession, for identity: AppIdentity) -> TransferFailure? {
        uploads.takeUploadBody(path, into: &task, in: session, for: identity)
    }

    func keepRequestBody(_ body: Data, of task: TaskRecord, in session: DaemonSession) -> TransferFailure? {
        downloads.keepRequestBody(body, of: task, in: session)
    }

    func answerDelayedRequest(_ answer: DelayedRequestAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        try delayedRequests.answerDelayedRequest(answer, for: taskID, in: session)
    }

    func answerChallenge(_ answer: ChallengeAnswer, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        try challenges.answerChallenge(answer, for: taskID, in: session)
    }

    func answerRetryHeaders(_ fields: [HeaderField]?, for taskID: Int, in session: DaemonSession) throws -> TaskRecord? {
        try challenges.answerRetryHeaders(fields, for: taskID, in: session)
    }

    func taskSummaries(of session: DaemonSession) -> TaskSummaries { listing.taskSummaries(of: session) }

    func taskRecords(_ identifiers: [Int], of session: DaemonSession) -> [TaskRecord] { listing.taskRecords(identifiers, of: session) }
}
