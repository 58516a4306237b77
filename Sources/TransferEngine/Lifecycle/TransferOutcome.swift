import Foundation
import TransferContainer

/// What one transfer attempt of a task came to, once the transfer's own files are dealt with
/// (the body renamed, an error page removed): what `TaskLifecycle.onTransferEnded` decides by.
/// Challenges and restarts from zero are the transfers' own business and never get here.
/// A value type; any thread.
enum TransferOutcome: Equatable {
    /// The download's body is in place under its finished name.
    case downloaded(file: String)
    /// The upload is answered; the server's body, as much as is kept of it.
    case uploaded(responseBody: Data?)
    /// The attempt met something the retry policy judges (a 503/429 with `Retry-After`,
    /// network trouble, a server disagreeing about its chain).
    case mayRetry(RetryCause)
    /// The attempt failed in a way no retry mends (the disk, the protocol): the task ends.
    case failed(TransferFailure)
}
