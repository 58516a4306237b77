import TransferContainer
import TransferTransport

/// The running transfers' view of the daemon (on the loop thread): each requirement forwards
/// to the part that owns it, looked up when called, so no part is built from another's init.
extension TransferDaemon: RunningTransfersSurroundings {
    func transferSlotFreed(by task: TaskRecord) {
        scheduler.schedulingRequested = true
        scheduler.learnProtocol(of: task)
    }

    func downloadEnded(_ transfer: DownloadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {
        downloads.downloadEnded(transfer, result, in: session)
    }

    func uploadEnded(_ transfer: UploadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {
        uploads.uploadEnded(transfer, result, in: session)
    }

    func queueAgain(_ task: TaskRecord, in session: DaemonSession) {
        scheduler.scheduleTransfer(task, in: session)
    }

    func pushToHolder(_ push: DaemonPush, of session: DaemonSession) {
        delivery.push(push, to: session)
    }

    func pushFollowerProgress(of download: DownloadTransfer, in session: DaemonSession) {
        coalescing.pushFollowerProgress(of: download, in: session)
    }
}
