import Foundation
import FoundationNetworking
import TransferContainer

// Apple's `userInfo` keys for background transfer errors.
// NSURLErrorBackgroundTaskCancelledReasonKey is FoundationNetworking's own (same string).

/// The `userInfo` key of a failed download's resume data (S6.2); read it with
/// `URLError.downloadTaskResumeData`.
public let NSURLSessionDownloadTaskResumeData = "NSURLSessionDownloadTaskResumeData"
/// The `userInfo` key of a failed resumable upload's resume data (S6.6); read it with
/// `URLError.uploadTaskResumeData`.
public let NSURLSessionUploadTaskResumeData = "NSURLSessionUploadTaskResumeData"
/// The identifier or path an error is about (ours; Apple has no such key).
public let BackgroundTransferErrorSubjectKey = "BackgroundTransferErrorSubject"

/// Misuse that Apple reports by raising an exception (S1.2, S2.1): here a thrown error with
/// Apple's message.
public struct BackgroundSessionMisuse: Error, CustomStringConvertible, Equatable, Sendable {
    /// Apple's message for the misuse.
    public let message: String
    /// The message.
    public var description: String { message }

    /// A completion handler or async call on a background session (S1.2).
    public static let completionHandlersUnsupported = BackgroundSessionMisuse(message: "Completion handler blocks are not supported in background sessions. Use a delegate instead.")
    /// An upload from `Data` in a background session (S2.1).
    public static let uploadFromDataUnsupported = BackgroundSessionMisuse(message: "Upload tasks from NSData are not supported in background sessions.")
    /// An upload from a stream in a background session (S2.1).
    public static let uploadFromStreamUnsupported = BackgroundSessionMisuse(message: "Upload tasks in background sessions must be from a file")
    /// A task asked of a session that was invalidated (S1.4).
    public static let sessionInvalidated = BackgroundSessionMisuse(message: "Attempted to create a task in a session that has been invalidated")
}

extension TransferFailure {
    /// The error handed to delegates: a `URLError` with Apple's code and userInfo keys
    /// (resume data under the download or the upload key, after the task's kind).
    func urlError(failingURL: String? = nil, kind: TaskKind = .download) -> URLError {
        var userInfo: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let failingURL = self.failingURL ?? failingURL {
            userInfo["NSErrorFailingURLStringKey"] = failingURL
            if let url = URL(string: failingURL) { userInfo[NSURLErrorFailingURLErrorKey] = url }
        }
        if let reason = backgroundTaskCancelledReason { userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] = reason }
        if let resumeData { userInfo[kind == .upload ? NSURLSessionUploadTaskResumeData : NSURLSessionDownloadTaskResumeData] = resumeData }
        if let subject { userInfo[BackgroundTransferErrorSubjectKey] = subject }
        if let serverTrust { userInfo[NSURLErrorFailingURLPeerTrustErrorKey] = SecTrust(serverTrust) }
        return URLError(URLError.Code(rawValue: code) ?? .unknown, userInfo: userInfo)
    }
}

extension URLError {
    /// Why the system cancelled a background task (Apple's `URLError.BackgroundTaskCancelledReason`).
    public enum BackgroundTaskCancelledReason: Int, Sendable {
        /// The user force-quit the app (`bgtransfer force-quit`, S4.2).
        case userForceQuitApplication = 0
        /// Background updates are off for the app (never given here).
        case backgroundUpdatesDisabled = 1
        /// The system ran short of resources (never given here).
        case insufficientSystemResources = 2
    }

    /// The resume data of a download that failed or was cancelled, when it can be resumed.
    public var downloadTaskResumeData: Data? { userInfo[NSURLSessionDownloadTaskResumeData] as? Data }
    /// The resume data of an upload that failed or was cancelled, when the server offered resumption.
    public var uploadTaskResumeData: Data? { userInfo[NSURLSessionUploadTaskResumeData] as? Data }
    /// Why the system cancelled the task (force quit: `.userForceQuitApplication`), if it did.
    public var backgroundTaskCancelledReason: BackgroundTaskCancelledReason? {
        (userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int).flatMap(BackgroundTaskCancelledReason.init(rawValue:))
    }
}
