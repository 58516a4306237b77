import Foundation
import TransferContainer

/// What delayed requests may use of the daemon (on the loop thread). The challenges and
/// server trust use some of these members too (`ChallengeSurroundings`, `ServerTrustSurroundings`).
extension TransferDaemon: DelayedRequestSurroundings {
    func askHolder(_ asked: inout [TaskKey: AskedHolder], _ key: TaskKey, in session: DaemonSession,
                   now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> EventDelivery.HolderQuestion {
        delivery.askHolder(&asked, key, in: session, now: now, timeout: timeout, question())
    }

    func refusal(of creation: TaskCreation) -> TransferFailure? { requests.refusal(of: creation) }

    func replaceRequestBody(with body: NewRequestBody, of task: inout TaskRecord, in session: DaemonSession) -> TransferFailure? {
        downloads.replaceRequestBody(with: body, of: &task, in: session)
    }

    func failTask(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure) {
        completion.fail(task, in: session, failure)
    }

    func cancelTask(_ taskID: Int, in session: DaemonSession, failure: TransferFailure) throws {
        _ = try completion.cancel(taskID, in: session, failure: failure)
    }

    func requestScheduling() { scheduler.scheduleTransfers() }
}
