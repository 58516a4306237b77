import Foundation
import TransferContainer
import TransferTransport

/// Task completion's view of the daemon (on the loop thread): each requirement forwards to
/// the part that owns it, looked up when called, so no part is built from another's init.
extension TransferDaemon: TaskCompletionSurroundings {
    var nextResourceDeadline: Date {
        get { scheduler.nextResourceDeadline }
        set { scheduler.nextResourceDeadline = newValue }
    }

    func serverTrustFailed(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {
        serverTrust.trustFailed(task, in: session, error)
    }

    func forgetRequestsAndChallenges(of key: TaskKey) {
        delayedRequests.forget(key)
        challenges.forget(key)
        serverTrust.forget(key)
        scheduler.forget(key)
    }
}
