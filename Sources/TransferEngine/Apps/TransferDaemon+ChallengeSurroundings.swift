import Foundation
import TransferContainer

/// What the challenges may use of the daemon (on the loop thread). `askHolder`, `cancelTask`
/// and `requestScheduling()` are in `TransferDaemon+DelayedRequestSurroundings.swift`,
/// `announcePendingEvents` in `TransferDaemon+ServerTrustSurroundings.swift`.
extension TransferDaemon: ChallengeSurroundings {
    func completeDownload(_ task: TaskRecord, in session: DaemonSession) { downloads.completeDownload(task, in: session) }

    func completeUpload(_ task: TaskRecord, responseBody: Data?, in session: DaemonSession) {
        uploads.completeUpload(task, responseBody: responseBody, in: session)
    }
}
