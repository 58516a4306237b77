import TransferContainer
import TransferTransport

/// What a download's or an upload's exchange takes from outside the transfer layer, on the
/// daemon's loop thread: the credentials and trust policy the app's answers gave, the
/// session's cookie jar, and the challenge a response raises. `Uploads` needs no more;
/// `DownloadsSurroundings` adds to it. `TransferDaemon` answers
/// (`TransferDaemon+ExchangeSurroundings.swift`).
protocol ExchangeSurroundings: AnyObject {
    /// What the app answered to this task's (or its session's) authentication challenges.
    func credentials(for task: TaskRecord, in session: DaemonSession) -> TransferCredentials
    /// How the server's chain is judged for this task: device roots, or keys the app accepted.
    func tlsPolicy(for task: TaskRecord, in session: DaemonSession) -> TLSPolicy
    /// The cookie jar the session's configuration names; nil: none.
    func cookieJar(for session: DaemonSession) -> CookieJar?
    /// A 401/407 ended the exchange: true when it goes to the app as a challenge (the task
    /// waits for the answer), false when the response stands as the task's answer.
    func takeChallenge(_ task: TaskRecord, in session: DaemonSession) -> Bool
}
