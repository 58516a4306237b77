import Foundation
import FoundationNetworking
import TransferContainer

/// Apple's `userInfo` keys for background transfer errors.
// NSURLErrorBackgroundTaskCancelledReasonKey is FoundationNetworking's own (same string).
public let NSURLSessionDownloadTaskResumeData = "NSURLSessionDownloadTaskResumeData"
public let NSURLSessionUploadTaskResumeData = "NSURLSessionUploadTaskResumeData"
/// The identifier or path an error is about (ours; Apple has no such key).
public let BackgroundTransferErrorSubjectKey = "BackgroundTransferErrorSubject"

/// Misuse that Apple reports by raising an exception (S1.2, S2.1): here a thrown error with
/// Apple's message.
public struct BackgroundSessionMisuse: Error, CustomStringConvertible, Equatable, Sendable {
    public let message: String
    public var description: String { message }

    public static let completionHandlersUnsupported = BackgroundSessionMisuse(message: "Completion handler blocks are not supported in background sessions. Use a delegate instead.")
    public static let uploadFromDataUnsupported = BackgroundSessionMisuse(message: "Upload tasks from NSData are not supported in background sessions.")
    public static let uploadFromStreamUnsupported = BackgroundSessionMisuse(message: "Upload tasks in background sessions must be from a file")
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
        case userForceQuitApplication = 0
        case backgroundUpdatesDisabled = 1
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
