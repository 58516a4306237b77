import Foundation
import FoundationNetworking

/// The answers an app gives to the session's questions (Apple's enums and values). Values.
extension URLSession {
    /// What a task with an `earliestBeginDate` does when it is ready (Apple's names, S5.1).
    public enum DelayedRequestDisposition: Int, Sendable {
        /// Start the request as it is.
        case continueLoading = 0
        /// Start the request given with the answer instead.
        case useNewRequest = 1
        /// Cancel the task (-999).
        case cancel = 2
    }

    /// How the app answers an authentication challenge (Apple's names).
    public enum AuthChallengeDisposition: Int, Sendable {
        /// Use the credential given with the answer (for server trust, `URLCredential(trust:)`
        /// accepts the chain, S3.6).
        case useCredential = 0
        /// As if the delegate did not implement the method: a stored credential, else the
        /// 401/407 is delivered (for server trust, the system's verdict, S2.6).
        case performDefaultHandling = 1
        /// End the task with -999.
        case cancelAuthenticationChallenge = 2
        /// Decline this protection space: no stored credential is tried and the 401/407 is
        /// delivered (for server trust, the system's verdict).
        case rejectProtectionSpace = 3
    }
}
