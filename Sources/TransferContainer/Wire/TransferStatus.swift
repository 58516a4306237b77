import Foundation

/// One unfinished, running task as the daemon sees it at an instant, for watchers
/// (`DaemonPush.transfers`, `bgtransfer watch`): who it belongs to, what it transfers, how
/// far it is, and whether bytes are moving now or it waits (a retry backoff, a begin date,
/// the concurrency limit). Made by the daemon on its event loop; a plain value.
public struct TransferStatus: Codable, Sendable, Equatable {
    /// The app family the session belongs to (identifiers are unique per family).
    public var family: BundleIdentifier
    public var session: SessionIdentifier
    public var taskIdentifier: Int
    public var kind: TaskKind
    public var state: TaskState
    public var url: String
    public var taskDescription: String?
    /// Received for a download, sent for an upload.
    public var bytesDone: Int64
    /// Negative when unknown (`NSURLSessionTransferSizeUnknown`).
    public var bytesExpected: Int64
    /// Whether a transfer is in flight now; false while the task waits to be (re)started.
    public var isTransferring: Bool
    public var retryCount: Int
    /// Why a task that is not transferring waits, and until when (a retry and its cause, a
    /// begin date, the network, the rate limiter, a transfer slot and behind whom); nil when
    /// it only waits for a connection to its host or for the daemon's next turn.
    public var waitingFor: TaskHold?

    public init(family: BundleIdentifier, session: SessionIdentifier, taskIdentifier: Int, kind: TaskKind, state: TaskState, url: String,
                taskDescription: String?, bytesDone: Int64, bytesExpected: Int64, isTransferring: Bool, retryCount: Int, waitingFor: TaskHold? = nil) {
        self.family = family
        self.session = session
        self.taskIdentifier = taskIdentifier
        self.kind = kind
        self.state = state
        self.url = url
        self.taskDescription = taskDescription
        self.bytesDone = bytesDone
        self.bytesExpected = bytesExpected
        self.isTransferring = isTransferring
        self.retryCount = retryCount
        self.waitingFor = waitingFor
    }

    /// `<session>/<task>`: how a person names the task.
    public var name: String { "\(session)/\(taskIdentifier)" }
    /// `<family>/<session>/<task>`: unique in the container.
    public var key: String { "\(family)/\(name)" }
}
