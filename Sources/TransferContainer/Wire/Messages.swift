import Foundation

/// What a process tells the daemon about itself when it connects; the daemon fills its app
/// registry from it (bundle → executable, containing app, app groups).
public struct ClientHello: Codable, Sendable {
    public var identity: AppIdentity
    /// The executable behind the process (`/proc/self/exe`).
    public var executablePath: String
    public var processName: String
    /// `true` when the process was launched by the user (foreground), `false` when launched
    /// by the system for events or when it is an extension.
    public var isForeground: Bool
    /// The process reads `getAllTasks` replies in their compact form (`TaskSummaries.Form`);
    /// nil from clients before it, which are sent the fixed form.
    public var readsCompactSummaries: Bool?

    public init(identity: AppIdentity, executablePath: String, processName: String, isForeground: Bool, readsCompactSummaries: Bool? = nil) {
        self.identity = identity
        self.executablePath = executablePath
        self.processName = processName
        self.isForeground = isForeground
        self.readsCompactSummaries = readsCompactSummaries
    }
}

/// A task to create, as the client library asks for it.
public struct TaskCreation: Codable, Sendable {
    public var kind: TaskKind
    public var request: RequestRecord
    public var taskDescription: String?
    public var priority: Float
    public var earliestBeginDate: Date?
    public var uploadFile: String?
    /// For a download task: the request's `httpBody` (at most `TransferLimits.requestBodyBytes`),
    /// which the daemon keeps beside the task and sends with every attempt.
    public var requestBody: Data?
    /// For `downloadTask(withResumeData:)`: the blob as the app handed it back.
    public var resumeData: Data?
    /// From the creating process's configuration and request; the daemon makes every task
    /// created in the background discretionary.
    public var requirements: TaskRequirements
    /// The identifier the session's holder chose (it alone creates the session's tasks, so
    /// `downloadTask(with:)` returns at once, as on Apple's systems); nil lets the daemon choose.
    /// Creating an existing task again (a request resent after a reconnect) is harmless.
    public var taskIdentifier: Int?

    public init(kind: TaskKind, request: RequestRecord, taskDescription: String? = nil, priority: Float = 0.5, earliestBeginDate: Date? = nil, uploadFile: String? = nil, resumeData: Data? = nil, requirements: TaskRequirements = .init()) {
        self.kind = kind
        self.request = request
        self.taskDescription = taskDescription
        self.priority = priority
        self.earliestBeginDate = earliestBeginDate
        self.uploadFile = uploadFile
        self.resumeData = resumeData
        self.requirements = requirements
    }
}

/// A task's properties the app may set until it starts (and some after): Apple's
/// `taskDescription`, `priority`, `earliestBeginDate` and byte-count hints.
public struct TaskProperties: Codable, Sendable, Equatable {
    public var taskDescription: String?
    public var priority: Float
    public var earliestBeginDate: Date?
    public var countOfBytesClientExpectsToSend: Int64
    public var countOfBytesClientExpectsToReceive: Int64

    public init(of task: TaskRecord) {
        taskDescription = task.taskDescription
        priority = task.priority
        earliestBeginDate = task.earliestBeginDate
        countOfBytesClientExpectsToSend = task.countOfBytesClientExpectsToSend
        countOfBytesClientExpectsToReceive = task.countOfBytesClientExpectsToReceive
    }

    public func apply(to task: inout TaskRecord) {
        task.taskDescription = taskDescription
        task.priority = CheckedNumbers.priority(priority)
        task.earliestBeginDate = earliestBeginDate
        task.countOfBytesClientExpectsToSend = CheckedNumbers.clamp(countOfBytesClientExpectsToSend, to: CheckedNumbers.byteCounts)
        task.countOfBytesClientExpectsToReceive = CheckedNumbers.clamp(countOfBytesClientExpectsToReceive, to: CheckedNumbers.byteCounts)
    }
}

/// The app's answer to `willBeginDelayedRequest` (Apple's `URLSession.DelayedRequestDisposition`, S5.1).
public enum DelayedRequestAnswer: Codable, Sendable, Equatable {
    case continueLoading
    /// Send this request instead: its method, headers and URL, and for a download task its body.
    case useNewRequest(RequestRecord, body: NewRequestBody = .absent)
    case cancel
}

/// Client → daemon. Each request gets exactly one `DaemonReply` with the same id.
public enum DaemonRequest: Codable, Sendable {
    case hello(ClientHello)
    /// Attach to (or create) a session; the daemon then replays its undelivered events.
    /// `withoutDelegate`: the process opened it with no delegate, so its events are
    /// acknowledged without reaching one (recorded for `inspect`; nil from older clients).
    case openSession(identifier: SessionIdentifier, configuration: SessionConfiguration, launchedForEvents: Bool,
                     withoutDelegate: Bool? = nil)
    /// Creates a task, durable before the reply (suspended, S2.4).
    case createTask(session: SessionIdentifier, TaskCreation)
    case resumeTask(session: SessionIdentifier, task: Int)
    case suspendTask(session: SessionIdentifier, task: Int)
    /// Cancels; with `produceResumeData`, answers `.cancelled` with resume data when the
    /// download can be resumed (S6.1).
    case cancelTask(session: SessionIdentifier, task: Int, produceResumeData: Bool)
    case setTaskProperties(session: SessionIdentifier, task: Int, TaskProperties)
    /// The answer to a `.delayedRequest` push.
    case answerDelayedRequest(session: SessionIdentifier, task: Int, DelayedRequestAnswer)
    /// Answered `.taskSummaries`: every unfinished task of the session, in identifier order.
    case getAllTasks(session: SessionIdentifier)
    /// Answered `.tasks`: the records of those `identifiers` that are unfinished tasks of the
    /// session, in identifier order (for tasks a summary named that the client has not seen as they are).
    case getTasks(session: SessionIdentifier, identifiers: [Int])
    /// Every event numbered up to `through` was handled; the daemon may forget it.
    case acknowledge(session: SessionIdentifier, through: UInt64)
    /// `finishTasksAndInvalidate` (cancelTasks false) or `invalidateAndCancel` (true).
    case invalidate(session: SessionIdentifier, cancelTasks: Bool)
    /// Detach from the session without invalidating it.
    case closeSession(session: SessionIdentifier)
    case ping
    /// The user force-quit an app (S4.2): cancel every task of its sessions and its
    /// extensions', end its processes, relaunch nothing until the user launches it again.
    /// Sent by `bgtransfer force-quit`, after a hello as a tool or as the app's own family.
    case forceQuit(app: BundleIdentifier)
    /// Read-only watching (`bgtransfer watch`): answered `.ok`, then the daemon pushes
    /// `.transfers` on this connection (at once, about every 250 ms while anything runs, and
    /// once when nothing runs any more) until it closes. Only after a hello as a tool.
    case watch
    /// The answer to a `.challenge` push.
    case answerChallenge(session: SessionIdentifier, task: Int, ChallengeAnswer)
    /// The answer to a `.retryHeaders` push: header fields to set on the request (nil: none).
    case answerRetryHeaders(session: SessionIdentifier, task: Int, [HeaderField]?)
    /// `bgtransfer conditions` wrote new device conditions: read them and obey them now.
    /// Only after a hello as a tool.
    case conditionsChanged
}

/// A request on the wire: the id pairs it with its reply.
public struct RequestFrame: Codable, Sendable {
    public var id: UInt64
    public var request: DaemonRequest
    public init(id: UInt64, request: DaemonRequest) {
        self.id = id
        self.request = request
    }
}

/// The number of a request whose body cannot be read as a whole (`RequestFrame`), for
/// answering it under that number.
public struct RequestNumber: Decodable, Sendable {
    public var id: UInt64

    /// The number of a body that is not even JSON (cut short, bytes after it, a broken
    /// string) but begins as every client's request does, with `{"id":N` (`RequestFrame`
    /// encodes its number first): N, when it is a whole number that fits and is followed by
    /// `,` or `}`. Else nil.
    public static func leading(in body: Data) -> UInt64? {
        var bytes = body.prefix(64).makeIterator()
        var next = bytes.next()
        func skipSpace() {
            while let byte = next, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { next = bytes.next() }
        }
        func expect(_ text: String) -> Bool {
            for expected in text.utf8 {
                guard next == expected else { return false }
                next = bytes.next()
            }
            return true
        }
        skipSpace()
        guard expect("{") else { return nil }
        skipSpace()
        guard expect("\"id\"") else { return nil }
        skipSpace()
        guard expect(":") else { return nil }
        skipSpace()
        var number: UInt64 = 0
        var digits = 0
        while let byte = next, (0x30...0x39).contains(byte) {
            let (times, overflowA) = number.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(UInt64(byte - 0x30))
            guard !overflowA, !overflowB, !(digits == 1 && number == 0) else { return nil }
            number = sum
            digits += 1
            next = bytes.next()
        }
        skipSpace()
        guard digits > 0, next == UInt8(ascii: ",") || next == UInt8(ascii: "}") else { return nil }
        return number
    }
}

/// Daemon → client, the answer to one request.
public enum DaemonReply: Codable, Sendable {
    /// Task records per reply when a session is opened, and per `getTasks` the client sends
    /// for the rest: a session of any size opens in pieces of a few MB, each answered well
    /// within a request's timeout. Pages are bounded in bytes too (`pageLength(of:)`).
    public static let tasksPerPage = 10_000

    case ok
    case welcome(daemonPID: Int32)
    /// The session is attached; `tasks` are its unfinished tasks (S1.7), at most
    /// `tasksPerPage` of them: the identifiers of the others are in `moreTasks`, for the
    /// client to ask for with `getTasks`, a page at a time. The holder's next task gets
    /// `nextTaskIdentifier`.
    case sessionOpened(tasks: [TaskRecord], nextTaskIdentifier: Int, moreTasks: [Int]? = nil)
    case task(TaskRecord)
    /// Those asked for in identifier order, as many as a page holds (`pageLength(of:)`): the
    /// client asks again for the ones after the last it got.
    case tasks([TaskRecord])
    case taskSummaries(TaskSummaries)
    case forceQuitDone(cancelledTasks: Int, terminatedProcesses: [Int32])
    case cancelled(resumeData: Data?)
    case failure(TransferFailure)
}

/// Daemon → client, unasked.
public enum DaemonPush: Codable, Sendable {
    /// A durable event: the client acknowledges it once handled.
    case event(session: SessionIdentifier, EventRecord)
    /// Progress of a running task; not durable, rate-limited, only to an attached client (S7.3).
    case progress(session: SessionIdentifier, TaskProgress)
    /// A download made from resume data started receiving: at `offset`, or 0 if the server
    /// sent the whole body again (`didResumeAtOffset:expectedTotalBytes:`, S6.1).
    case didResume(session: SessionIdentifier, taskIdentifier: Int, offset: Int64, expectedTotalBytes: Int64)
    /// A resumed task cannot start for want of a suitable network (S5.2); sent once per task.
    case waitingForConnectivity(session: SessionIdentifier, taskIdentifier: Int)
    /// A task with an `earliestBeginDate` is ready to start: the app answers with
    /// `.answerDelayedRequest` (`willBeginDelayedRequest`, S5.1).
    case delayedRequest(session: SessionIdentifier, TaskRecord)
    /// The task's `pendingChallenge` needs the app's answer (`.answerChallenge`).
    case challenge(session: SessionIdentifier, TaskRecord)
    /// The task is about to be retried or resumed: the app may refresh its headers
    /// (`.answerRetryHeaders`).
    case retryHeaders(session: SessionIdentifier, TaskRecord)
    /// Every event that was waiting when the session was opened has been sent (up to `through`).
    case backlogDelivered(session: SessionIdentifier, through: UInt64)
    /// The daemon finished invalidating the session.
    case invalidated(session: SessionIdentifier, TransferFailure?)
    /// To a watcher (`DaemonRequest.watch`): every running task of the container, in every session.
    case transfers([TransferStatus])
}

extension DaemonPush {
    /// The session a push is about; nil for what goes to watchers.
    public var session: SessionIdentifier? {
        switch self {
        case .event(let session, _), .progress(let session, _), .didResume(let session, _, _, _), .waitingForConnectivity(let session, _),
             .delayedRequest(let session, _), .challenge(let session, _), .retryHeaders(let session, _),
             .backlogDelivered(let session, _), .invalidated(let session, _):
            session
        case .transfers:
            nil
        }
    }
}

/// Progress of one task: bytes received (`didWriteData`) for a download, bytes sent
/// (`didSendBodyData`) for an upload.
public struct TaskProgress: Codable, Sendable, Equatable {
    public var taskIdentifier: Int
    public var bytesWritten: Int64
    public var totalBytesWritten: Int64
    public var totalBytesExpectedToWrite: Int64
    public var bytesSent: Int64
    public var totalBytesSent: Int64
    public var totalBytesExpectedToSend: Int64
    public var state: TaskState
    public var currentURL: String?
    public var response: ResponseRecord?

    public init(taskIdentifier: Int, bytesWritten: Int64 = 0, totalBytesWritten: Int64 = 0, totalBytesExpectedToWrite: Int64 = -1,
                bytesSent: Int64 = 0, totalBytesSent: Int64 = 0, totalBytesExpectedToSend: Int64 = -1,
                state: TaskState, currentURL: String? = nil, response: ResponseRecord? = nil) {
        self.taskIdentifier = taskIdentifier
        self.bytesWritten = bytesWritten
        self.totalBytesWritten = totalBytesWritten
        self.totalBytesExpectedToWrite = totalBytesExpectedToWrite
        self.bytesSent = bytesSent
        self.totalBytesSent = totalBytesSent
        self.totalBytesExpectedToSend = totalBytesExpectedToSend
        self.state = state
        self.currentURL = currentURL
        self.response = response
    }
}

/// One frame from the daemon.
public enum DaemonFrame: Codable, Sendable {
    case reply(id: UInt64, DaemonReply)
    case push(DaemonPush)
}
