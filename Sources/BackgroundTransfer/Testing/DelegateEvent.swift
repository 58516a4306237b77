/// One delegate call as a process saw it, written by `DelegateEventRecorder` and read back by a
/// test (BackgroundTransferTesting's `DelegateEventLog`): typed facts, not log wording.
/// A value; no shared state.
public struct DelegateEvent: Codable, Sendable, Equatable {
    /// Which delegate method was called.
    public enum Kind: String, Codable, Sendable {
        /// `urlSession(_:downloadTask:didWriteData:totalBytesWritten:totalBytesExpectedToWrite:)`.
        case didWriteData
        /// `urlSession(_:downloadTask:didResumeAtOffset:expectedTotalBytes:)`.
        case didResumeAtOffset
        /// `urlSession(_:downloadTask:didFinishDownloadingTo:)`.
        case didFinishDownloadingTo
        /// `urlSession(_:task:didCompleteWithError:)`.
        case didCompleteWithError
        /// `urlSession(_:taskIsWaitingForConnectivity:)`.
        case taskIsWaitingForConnectivity
        /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
        case didFinishEvents
        /// `urlSession(_:didBecomeInvalidWithError:)`.
        case didBecomeInvalid
        /// The app delegate's `application(_:handleEventsForBackgroundURLSession:completionHandler:)`:
        /// a launch, or a wake of the same process, for the session's events, whose batch
        /// ends with its own `urlSessionDidFinishEvents` (S3.2).
        case handleEventsForBackgroundURLSession
    }

    /// The executable's file name (`reader-app`).
    public var process: String
    /// The process's id: a relaunch is another pid.
    public var pid: Int32
    /// The call's place among this process's recorded calls, from 1.
    public var sequence: Int
    /// When it was recorded.
    public var time: Date
    /// Which method.
    public var kind: Kind
    /// The background session's identifier (nil for a default session).
    public var session: String?
    /// The task's `taskIdentifier`, for calls about a task.
    public var task: Int?
    /// The task's `taskDescription`.
    public var taskDescription: String?
    /// The task's original URL.
    public var url: String?
    /// The HTTP status of the task's response, when it has one.
    public var statusCode: Int?
    /// The error's code (`URLError.Code` raw value, -999 for a cancellation); nil for success.
    public var errorCode: Int?
    /// `NSURLErrorBackgroundTaskCancelledReasonKey` of the error (0: the user force-quit the app).
    public var cancelledReason: Int?
    /// Whether the error carries resume data.
    public var hasResumeData: Bool
    /// `didFinishDownloadingTo`: the size of the file during the call (nil if there was none);
    /// `didWriteData`: total bytes written; `didResumeAtOffset`: the offset.
    public var bytes: Int64?

    /// An event with the given facts (the recorder makes them; tests compare with them).
    public init(process: String, pid: Int32, sequence: Int, time: Date, kind: Kind, session: String? = nil, task: Int? = nil, taskDescription: String? = nil,
                url: String? = nil, statusCode: Int? = nil, errorCode: Int? = nil, cancelledReason: Int? = nil, hasResumeData: Bool = false, bytes: Int64? = nil) {
        self.process = process
        self.pid = pid
        self.sequence = sequence
        self.time = time
        self.kind = kind
        self.session = session
        self.task = task
        self.taskDescription = taskDescription
        self.url = url
        self.statusCode = statusCode
        self.errorCode = errorCode
        self.cancelledReason = cancelledReason
        self.hasResumeData = hasResumeData
        self.bytes = bytes
    }
}
