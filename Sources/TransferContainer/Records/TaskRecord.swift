import Foundation

/// What kind of transfer a task is.
public enum TaskKind: String, Codable, Sendable {
    case download
    case upload
}

/// A task's state, with Apple's raw values (`URLSessionTask.State`).
public enum TaskState: Int, Codable, Sendable {
    case running = 0
    case suspended = 1
    case canceling = 2
    case completed = 3

    public var name: String {
        switch self {
        case .running: "running"
        case .suspended: "suspended"
        case .canceling: "canceling"
        case .completed: "completed"
        }
    }
}

/// One header field, order preserved. Printed with secret values (`Authorization`, …) hidden.
public struct HeaderField: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    public var isSecret: Bool { RequestRecord.secretHeaders.contains(name.lowercased()) }
    public var description: String { "\(name): \(isSecret ? "<redacted>" : value)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["name": name, "value": isSecret ? "<redacted>" : value]) }
}

/// The request a task was created with.
public struct RequestRecord: Codable, Sendable, Equatable {
    /// Header fields whose values are secrets: shown as `<redacted>` wherever a request is shown.
    public static let secretHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The request as inspection and logs show it: secret header values replaced.
    public var redacted: RequestRecord {
        var copy = self
        copy.headers = headers.map { $0.isSecret ? HeaderField(name: $0.name, value: "<redacted>") : $0 }
        return copy
    }

    public var url: String
    public var httpMethod: String
    public var headers: [HeaderField]
    public var timeoutInterval: Double?

    public init(url: String, httpMethod: String = "GET", headers: [HeaderField] = [], timeoutInterval: Double? = nil) {
        self.url = url
        self.httpMethod = httpMethod
        self.headers = headers
        self.timeoutInterval = timeoutInterval
    }
}

/// The final HTTP response of a task (after redirects).
public struct ResponseRecord: Codable, Sendable, Equatable {
    public var url: String
    public var statusCode: Int
    public var headers: [String: String]

    public init(url: String, statusCode: Int, headers: [String: String]) {
        self.url = url
        self.statusCode = statusCode
        self.headers = headers
    }

    /// A header by name, whatever its ASCII case.
    public func header(_ name: String) -> String? {
        headers.first { $0.key.isSameHTTPFieldName(as: name) }?.value
    }
}

/// The validator a download first saw, against which a resumed request sends `If-Range`.
public struct Validator: Codable, Sendable, Equatable {
    public var entityTag: String?
    public var lastModified: String?

    public init(entityTag: String?, lastModified: String?) {
        self.entityTag = entityTag
        self.lastModified = lastModified
    }

    /// The value for `If-Range`: the strong ETag if there is one, else the date (weak ETags never match a range).
    public var ifRangeValue: String? {
        if let tag = entityTag, !tag.hasPrefix("W/") { return tag }
        return lastModified
    }
}

/// Where a server that speaks "Resumable Uploads for HTTP" keeps an upload (S6.6): the
/// `Location` of its `104` answer and the draft interop version it was created with.
public struct UploadResumption: Codable, Sendable, Equatable {
    /// The upload resource, absolute.
    public var location: String
    /// 3, 5 or 6 (`Upload-Draft-Interop-Version`).
    public var interopVersion: Int

    public init(location: String, interopVersion: Int) {
        self.location = location
        self.interopVersion = interopVersion
    }

    /// The interop versions spoken, as NIOResumableUpload does.
    public static let supportedVersions: Set<Int> = [3, 5, 6]
    /// Sent on a new upload unless the request names another.
    public static let defaultVersion = 6
}

/// One task not yet finished, as the session's journal (`Sessions/<family>/<identifier>/journal.jsonl`)
/// records it. Written by the daemon only; also the snapshot of a task sent to clients. A
/// value type (any thread) whose fields (`TaskFields`, read as its own: `task.state`) lie in
/// one allocation that copies share until one of them changes a field: a daemon holds
/// hundreds of thousands of these in dictionaries and arrays, whose slots would otherwise
/// each hold the fields' 700-odd bytes (and a dictionary has up to twice as many slots as
/// tasks), and move them whole at every copy.
@dynamicMemberLookup
public struct TaskRecord: Codable, Sendable, Equatable, CustomReflectable {
    public static let currentVersion = 1

    @usableFromInline var storage: Storage

    public init(taskIdentifier: Int, kind: TaskKind, originalRequest: RequestRecord, createdAt: Date = Date()) {
        storage = Storage(TaskFields(taskIdentifier: taskIdentifier, kind: kind, originalRequest: originalRequest, createdAt: createdAt))
    }

    @inlinable public subscript<Value>(dynamicMember field: WritableKeyPath<TaskFields, Value>) -> Value {
        get { storage.fields[keyPath: field] }
        set {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
            storage.fields[keyPath: field] = newValue
        }
    }

    /// Changes the fields in place as one access. For a field written at every piece of a
    /// body: `task.field += n` goes through a key path that the runtime looks up at each call
    /// (`swift_getKeyPath`, and a retain and a release of what it returns): 3 % of the
    /// daemon's CPU in a large download.
    @inlinable public mutating func update<Result>(_ change: (inout TaskFields) -> Result) -> Result {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return change(&storage.fields)
    }

    /// The JSON of a record is its fields'.
    public init(from decoder: any Decoder) throws {
        storage = Storage(try TaskFields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try storage.fields.encode(to: encoder)
    }

    public static func == (left: TaskRecord, right: TaskRecord) -> Bool {
        left.storage === right.storage || left.storage.fields == right.storage.fields
    }

    public var customMirror: Mirror { Mirror(reflecting: storage.fields) }

    /// The fields, shared by copies of a record. Written only through a `TaskRecord` that
    /// holds the one reference to it (copy on write), hence never while another thread reads.
    @usableFromInline final class Storage: @unchecked Sendable {
        @usableFromInline var fields: TaskFields

        @usableFromInline init(_ fields: TaskFields) {
            self.fields = fields
        }
    }
}

/// The fields of a `TaskRecord`, which reads and writes them as its own (`task.state`). The
/// JSON of a task record is these fields'. Those most tasks do not have, and that would take
/// tens of bytes or more each, are `@Indirect`. A value type; any thread.
public struct TaskFields: Codable, Sendable, Equatable {
    public var version: Int = TaskRecord.currentVersion
    /// Raised by the daemon each time it writes the record (`nextRevision(after:)`): a client
    /// whose snapshot has the revision a `getAllTasks` summary names holds the record as it is,
    /// but for the state and byte counts the summary brings. 0 in records written before
    /// revisions were kept.
    @ZeroIfAbsent public var revision: Int = 0
    /// Unique within its session, numbered from the daemon's counter for the session (the daemon refuses a number used before), stable across relaunch (S7.1).
    public var taskIdentifier: Int
    public var kind: TaskKind
    public var originalRequest: RequestRecord
    /// The URL after redirects (`currentRequest`).
    public var currentURL: String?
    public var taskDescription: String?
    public var priority: Float = 0.5
    public var earliestBeginDate: Date?
    public var state: TaskState = .suspended
    public var countOfBytesReceived: Int64 = 0
    /// -1 (`NSURLSessionTransferSizeUnknown`) until the server says.
    public var countOfBytesExpectedToReceive: Int64 = -1
    public var countOfBytesSent: Int64 = 0
    public var countOfBytesExpectedToSend: Int64 = -1
    public var countOfBytesClientExpectsToReceive: Int64 = -1
    public var countOfBytesClientExpectsToSend: Int64 = -1
    @Indirect public var validator: Validator? = nil
    @Indirect public var response: ResponseRecord? = nil
    /// For uploads: the file the body is read from (the daemon's own link to the app's file).
    /// The daemon keeps it relative to the container's root, like `EventRecord.downloadedFile`.
    public var uploadFile: String?
    /// For a download task whose request has a body: its length. The daemon keeps the bytes
    /// beside the task (`task-N.body` in the session's cache folder) and sends them with every
    /// attempt; nil for a request without a body.
    public var requestBodyLength: Int64?
    /// The kept body came with the request the app gave in `willBeginDelayedRequest`
    /// (`task-N.new-body`), not with the task (`task-N.body`): a power cut then leaves the
    /// record naming the file that goes with it. nil otherwise.
    public var requestBodyReplaced: Bool?
    /// For uploads to a server that offered resumption: where the upload continues.
    @Indirect public var uploadResumption: UploadResumption? = nil
    public var createdAt: Date
    /// Whether the creating process was in the background (such tasks are discretionary).
    public var createdInBackground: Bool = false
    /// What the task asks of the network and power before it runs (S5).
    public var requirements = TaskRequirements()
    /// Created in the background while the app's resume rate limiter ran: not before this (S6.5).
    public var rateLimitedUntil: Date?
    /// `taskIsWaitingForConnectivity` was sent; it is sent once per task (S5.2).
    public var reportedWaitingForConnectivity = false
    /// For a task with an `earliestBeginDate`: the app was asked `willBeginDelayedRequest`
    /// (or nobody was attached to ask), so the task may start (S5.1).
    public var delayedRequestAnswered = false
    /// The request the app gave in `willBeginDelayedRequest` with `.useNewRequest` (or with
    /// refreshed headers before a retry); sent instead of `originalRequest`.
    @Indirect public var replacementRequest: RequestRecord? = nil
    /// The server or proxy asked for credentials: the task waits for the app's answer.
    @Indirect public var pendingChallenge: ChallengeRecord? = nil
    /// Credentials for the task's protection space that were refused so far.
    public var authenticationFailures = 0
    /// Why the task cannot run (a refused URL): it fails with this error when resumed, as
    /// Apple's tasks for unsupported URLs do.
    @Indirect public var pendingFailure: TransferFailure? = nil
    public var retryCount: Int = 0
    public var lastError: String?
    /// What the last failed attempt met, when it is tried again (nil in records written
    /// before causes were kept, and once an attempt succeeds).
    @Indirect public var retryCause: RetryCause? = nil
    /// While waiting out a retry backoff or a `Retry-After`: when the next attempt may start.
    public var retryNotBefore: Date?
    /// Made from resume data and not yet started: the first response is reported with
    /// `didResumeAtOffset:expectedTotalBytes:`.
    public var reportsResumeOffset: Bool = false
    /// Daemons that crashed while working on this task (`CrashGuard`); nil for none. The
    /// second crash fails the task instead of trying it again.
    public var daemonCrashes: Int?
    /// Times this task's transfer failed server trust while the probe then verified the
    /// chain (servers behind one name that disagree); nil for none. Kept in the record so
    /// that the bound on them holds across daemon restarts.
    public var trustDisagreements: Int?
    /// The protocol of the last response (ALPN's names: "h2", "http/1.1"; Apple's
    /// `URLSessionTaskTransactionMetrics.networkProtocolName`); nil before one arrived and in
    /// records written before it existed.
    public var networkProtocolName: String?
    /// The redirects followed on the way to the last response (Apple's
    /// `URLSessionTaskMetrics.redirectCount`); nil before a response arrived and in records
    /// written before it existed.
    public var redirectCount: Int?

    init(taskIdentifier: Int, kind: TaskKind, originalRequest: RequestRecord, createdAt: Date) {
        self.taskIdentifier = taskIdentifier
        self.kind = kind
        self.originalRequest = originalRequest
        self.createdAt = createdAt
    }
}

extension TaskRecord {
    /// A new task as `creation` asks for it: suspended until resumed (S2.4).
    public init(taskIdentifier: Int, creation: TaskCreation, createdAt: Date = Date()) {
        self.init(taskIdentifier: taskIdentifier, kind: creation.kind, originalRequest: creation.request, createdAt: createdAt)
        self.taskDescription = creation.taskDescription
        self.priority = CheckedNumbers.priority(creation.priority)
        self.earliestBeginDate = creation.earliestBeginDate
        self.uploadFile = creation.uploadFile
        self.requestBodyLength = creation.kind == .download ? creation.requestBody.map { Int64($0.count) } : nil
        self.requirements = creation.requirements
        self.state = .suspended
    }

    /// Whether a stopped download can be resumed from `partialBytes` on disk: a GET whose
    /// server sent a strong validator and accepts byte ranges (S6.1).
    public func canResume(partialBytes: Int64) -> Bool {
        guard self.kind == .download, self.originalRequest.httpMethod.uppercased() == "GET", self.requestBodyLength == nil,
              self.validator?.ifRangeValue != nil,
              let ranges = self.response?.header("Accept-Ranges"), ranges.lowercased().contains("bytes") else { return false }
        return partialBytes > 0
    }
}

extension TaskRecord {
    /// This record as the next durable version of a task whose record is now `previous`: its
    /// revision one past both (a copy taken before an earlier write must not repeat a revision).
    public func nextRevision(after previous: TaskRecord?) -> TaskRecord {
        var next = self
        next.revision = min(max(self.revision, previous?.revision ?? 0), CheckedNumbers.counters.upperBound - 1) + 1
        return next
    }

    /// This record as read from outside the daemon's memory (a journal line, an event), its
    /// numbers checked: an identifier out of range makes the record unusable (thrown);
    /// counters, byte counts and the priority are brought into range, so that no later
    /// `+ 1` or comparison can trap.
    public consuming func checked(in path: String) throws(RecordError) -> TaskRecord {
        var task = self
        guard CheckedNumbers.check(task.taskIdentifier, in: CheckedNumbers.taskIdentifiers) != nil else {
            throw .corrupt(path: path, reason: "task identifier \(task.taskIdentifier) is outside \(CheckedNumbers.taskIdentifiers)")
        }
        task.revision = CheckedNumbers.clamp(task.revision, to: CheckedNumbers.counters)
        task.retryCount = CheckedNumbers.clamp(task.retryCount, to: CheckedNumbers.counters)
        task.authenticationFailures = CheckedNumbers.clamp(task.authenticationFailures, to: CheckedNumbers.counters)
        task.daemonCrashes = task.daemonCrashes.map { CheckedNumbers.clamp($0, to: CheckedNumbers.counters) }
        task.trustDisagreements = task.trustDisagreements.map { CheckedNumbers.clamp($0, to: CheckedNumbers.counters) }
        if let failures = task.pendingChallenge?.previousFailureCount {
            task.pendingChallenge?.previousFailureCount = CheckedNumbers.clamp(failures, to: CheckedNumbers.counters)
        }
        task.priority = CheckedNumbers.priority(task.priority)
        task.countOfBytesReceived = CheckedNumbers.clamp(task.countOfBytesReceived, to: 0...CheckedNumbers.byteCounts.upperBound)
        task.countOfBytesSent = CheckedNumbers.clamp(task.countOfBytesSent, to: 0...CheckedNumbers.byteCounts.upperBound)
        task.countOfBytesExpectedToReceive = CheckedNumbers.clamp(task.countOfBytesExpectedToReceive, to: CheckedNumbers.byteCounts)
        task.countOfBytesExpectedToSend = CheckedNumbers.clamp(task.countOfBytesExpectedToSend, to: CheckedNumbers.byteCounts)
        task.countOfBytesClientExpectsToReceive = CheckedNumbers.clamp(task.countOfBytesClientExpectsToReceive, to: CheckedNumbers.byteCounts)
        task.countOfBytesClientExpectsToSend = CheckedNumbers.clamp(task.countOfBytesClientExpectsToSend, to: CheckedNumbers.byteCounts)
        return task
    }
}

/// An `Int` record field that reads as 0 when its key is missing, as in records written
/// before the field existed.
@propertyWrapper
public struct ZeroIfAbsent: Codable, Sendable, Equatable {
    public var wrappedValue: Int

    public init(wrappedValue: Int) {
        self.wrappedValue = wrappedValue
    }

    public init(from decoder: any Decoder) throws {
        wrappedValue = try decoder.singleValueContainer().decode(Int.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(wrappedValue)
    }
}

extension KeyedDecodingContainer {
    /// What synthesized decoding calls for a `@ZeroIfAbsent` field: a missing key is 0.
    func decode(_ type: ZeroIfAbsent.Type, forKey key: Key) throws -> ZeroIfAbsent {
        try decodeIfPresent(type, forKey: key) ?? ZeroIfAbsent(wrappedValue: 0)
    }
}

extension TaskRecord {
    /// The request each exchange of the task sends.
    public var requestToSend: RequestRecord { self.replacementRequest ?? self.originalRequest }

    /// The bytes a task moves its own way, done and expected: received for a download, sent
    /// for an upload.
    public var progressBytes: (done: Int64, expected: Int64) {
        self.kind == .upload ? (self.countOfBytesSent, self.countOfBytesExpectedToSend) : (self.countOfBytesReceived, self.countOfBytesExpectedToReceive)
    }
}
