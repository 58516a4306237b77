import TransferContainer
import TransferTransport

/// The exchanges' view of the daemon (on the loop thread): credentials and challenges are
/// `Challenges`', the trust policy `ServerTrustChallenges`', looked up when asked. The
/// cookie jar is the daemon's own (`SessionCookies.swift`).
extension TransferDaemon: ExchangeSurroundings {
    func credentials(for task: TaskRecord, in session: DaemonSession) -> TransferCredentials {
        challenges.credentials(for: task, in: session)
    }

    func tlsPolicy(for task: TaskRecord, in session: DaemonSession) -> TLSPolicy {
        serverTrust.tlsPolicy(for: task, in: session)
    }

    func takeChallenge(_ task: TaskRecord, in session: DaemonSession) -> Bool {
        challenges.takeChallenge(task, in: session)
    }
}
