import Foundation

/// An error as it crosses the socket and lies on disk: an `NSURLErrorDomain` code (the
/// `URLError` codes Apple uses), a message, and what Apple puts in `userInfo`.
public struct TransferFailure: Error, Codable, Sendable, Equatable, CustomStringConvertible {
    public var code: Int
    public var message: String
    /// `NSURLErrorBackgroundTaskCancelledReasonKey`: 0 force quit, 1 background updates disabled, 2 insufficient resources.
    public var backgroundTaskCancelledReason: Int?
    /// `NSURLSessionDownloadTaskResumeData`, when the transfer can be resumed.
    public var resumeData: Data?
    /// The identifier, path or URL the error is about, when there is one.
    public var subject: String?
    /// The URL whose exchange failed (`NSURLErrorFailingURLStringErrorKey`), for transport
    /// failures; absent in records written before it existed.
    public var failingURL: String?
    /// For a TLS failure: the chain the server presented and what the default evaluation
    /// said of it (the counterpart of `NSURLErrorFailingURLPeerTrustErrorKey`).
    public var serverTrust: ServerTrustRecord?
    /// Why the daemon refused a request, where the asking library acts on the reason.
    public var refusal: Refusal?

    public init(code: Int, message: String, subject: String? = nil, backgroundTaskCancelledReason: Int? = nil, resumeData: Data? = nil) {
        self.code = code
        self.message = message
        self.subject = subject
        self.backgroundTaskCancelledReason = backgroundTaskCancelledReason
        self.resumeData = resumeData
    }

    public var description: String { "\(message) (\(code))" }

    // The codes this project uses, with Apple's values (SPEC "Error codes to use").
    public static let cancelled = -999
    public static let badURL = -1000
    public static let timedOut = -1001
    public static let unsupportedURL = -1002
    public static let cannotConnectToHost = -1004
    public static let networkConnectionLost = -1005
    public static let fileDoesNotExist = -1100
    public static let fileIsDirectory = -1101
    public static let noPermissionsToReadFile = -1102
    /// A request larger than the daemon takes, or more than it holds of unfinished requests.
    public static let dataLengthExceedsMaximum = -1103
    public static let cannotDecodeContentData = -1016
    public static let cannotOpenFile = -3001
    public static let backgroundSessionRequiresSharedContainer = -995
    public static let backgroundSessionInUseByAnotherProcess = -996
    public static let backgroundSessionWasDisconnected = -997
    public static let unknown = -1
    public static let cannotCreateFile = -3000
    public static let cannotWriteToFile = -3003
    /// The server answered something no request of ours asks for (a `206` for a range not requested).
    public static let badServerResponse = -1011
    /// Not a URL error: a request the daemon refused (bad input, not allowed).
    public static let requestRefused = -1011
    // TLS (S2.6): the server's chain did not verify, or the handshake failed.
    public static let secureConnectionFailed = -1200
    public static let serverCertificateHasBadDate = -1201
    public static let serverCertificateUntrusted = -1202
    public static let serverCertificateHasUnknownRoot = -1203
    public static let serverCertificateNotYetValid = -1204
    public static let clientCertificateRejected = -1205
    public static let clientCertificateRequired = -1206
}

/// What an event tells the app.
public enum EventKind: String, Codable, Sendable {
    /// A task finished: for a successful download, `didFinishDownloadingTo` and then
    /// `didCompleteWithError(nil)`; otherwise `didCompleteWithError`.
    case taskCompleted
}

/// One undelivered event, a line of its session's journal (`{"event": …}` in
/// `Sessions/<family>/<identifier>/journal.jsonl`), kept until the client acknowledges it.
/// Numbers grow by one per session, from 1.
public struct EventRecord: Codable, Sendable, Equatable {
    public static let currentVersion = 1

    public var version: Int = EventRecord.currentVersion
    public var number: UInt64
    public var kind: EventKind
    public var createdAt: Date
    /// The task as it ended.
    public var task: TaskRecord
    /// For a successful download: the finished file, to hand to `didFinishDownloadingTo`.
    /// Relative to the container's root (`ContainerLayout.recordPath`); absolute in records
    /// written before, read through `ContainerLayout.resolveRecordPath` either way.
    public var downloadedFile: String?
    public var error: TransferFailure?
    /// For an upload: the server's response body, for `didReceive data` (S2.1).
    public var responseBody: Data?
    /// The task's request header fields were past `TaskRecord.eventRequestHeaderBytes` and are
    /// not in `task` (`TaskRecord.forEvent`): a client keeps the request it already holds. Nil
    /// when they are all there.
    public var requestHeadersLeftOut: Bool?

    public init(number: UInt64, kind: EventKind, createdAt: Date = Date(), task: TaskRecord, downloadedFile: String? = nil, error: TransferFailure? = nil, responseBody: Data? = nil) {
        self.number = number
        self.kind = kind
        self.createdAt = createdAt
        self.task = task
        self.downloadedFile = downloadedFile
        self.error = error
        self.responseBody = responseBody
    }
}
