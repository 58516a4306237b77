import TransferContainer
import TransferTransport

/// What server trust may use of the daemon (on the loop thread). `failTask`, `cancelTask` and
/// `requestScheduling()` are in `TransferDaemon+DelayedRequestSurroundings.swift`;
/// `announcePendingEvents` serves the challenges too.
extension TransferDaemon: ServerTrustSurroundings {
    func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {
        completion.retryOrFail(task, in: session, error)
    }

    func retryOrFailTask(_ task: TaskRecord, in session: DaemonSession, after cause: RetryCause) {
        completion.retryOrFail(task, in: session, after: cause)
    }

    func announcePendingEvents(_ session: DaemonSession) { delivery.pushPendingEvents(session) }

    func requestScheduling(of task: TaskRecord, in session: DaemonSession) { scheduler.scheduleTransfer(task, in: session) }

    func challengeSettled(_ key: TaskKey) { challenges.answered(key) }
}
