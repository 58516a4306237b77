import Foundation

/// What a client needs of one unfinished task to bring the task object it already holds up
/// to date: the revision of the task's record (a client whose snapshot is of another revision
/// asks for the record itself, `DaemonRequest.getTasks`), and the state and byte counts, which
/// move between revisions.
public struct TaskSummary: Sendable, Equatable {
    public var taskIdentifier: Int
    public var revision: Int
    public var state: TaskState
    public var countOfBytesReceived: Int64
    public var countOfBytesExpectedToReceive: Int64
    public var countOfBytesSent: Int64
    public var countOfBytesExpectedToSend: Int64

    public init(taskIdentifier: Int, revision: Int, state: TaskState, countOfBytesReceived: Int64 = 0, countOfBytesExpectedToReceive: Int64 = -1,
                countOfBytesSent: Int64 = 0, countOfBytesExpectedToSend: Int64 = -1) {
        self.taskIdentifier = taskIdentifier
        self.revision = revision
        self.state = state
        self.countOfBytesReceived = countOfBytesReceived
        self.countOfBytesExpectedToReceive = countOfBytesExpectedToReceive
        self.countOfBytesSent = countOfBytesSent
        self.countOfBytesExpectedToSend = countOfBytesExpectedToSend
    }

    public init(of task: TaskRecord) {
        self.init(taskIdentifier: task.taskIdentifier, revision: task.revision, state: task.state,
                  countOfBytesReceived: task.countOfBytesReceived, countOfBytesExpectedToReceive: task.countOfBytesExpectedToReceive,
                  countOfBytesSent: task.countOfBytesSent, countOfBytesExpectedToSend: task.countOfBytesExpectedToSend)
    }
}

/// The answer to `getAllTasks`: a `TaskSummary` of each of a session's unfinished tasks, on
/// the wire as `{"count": N, "packed": "<base64>"}`, the summaries packed as seven
/// little-endian 64-bit integers each (identifier, revision, state, bytes received, expected
/// to receive, sent, expected to send). 10,000 full records took about half a second to
/// encode and decode as JSON, and JSON arrays of the numbers about 100 ms; this takes a few.
/// Or, for clients that read it, in the compact form (`CompactSummaryPacking`), an eighth of
/// the size.
public struct TaskSummaries: Codable, Sendable, Equatable {
    public var tasks: [TaskSummary]
    /// The form it is sent in (and was received in).
    public var form: Form

    /// How the summaries are packed on the wire.
    public enum Form: Sendable {
        /// Seven 64-bit integers each (`packed`): what every client reads.
        case fixed
        /// Varints (`compact`): for clients whose hello says they read it.
        case compact
    }

    public init(_ tasks: [TaskSummary], form: Form = .fixed) {
        self.tasks = tasks
        self.form = form
    }

    private static let bytesPerTask = 7 * MemoryLayout<Int64>.size

    private enum CodingKeys: String, CodingKey {
        case count
        case packed
        case compact
    }

    public func encode(to encoder: any Encoder) throws {
        guard form == .fixed else {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(tasks.count, forKey: .count)
            try container.encode(CompactSummaryPacking.pack(tasks), forKey: .compact)
            return
        }
        var packed = Data(count: tasks.count * Self.bytesPerTask)
        packed.withUnsafeMutableBytes { raw in
            var offset = 0
            func put(_ value: Int64) {
                raw.storeBytes(of: value.littleEndian, toByteOffset: offset, as: Int64.self)
                offset += 8
            }
            for task in tasks {
                put(Int64(task.taskIdentifier))
                put(Int64(task.revision))
                put(Int64(task.state.rawValue))
                put(task.countOfBytesReceived)
                put(task.countOfBytesExpectedToReceive)
                put(task.countOfBytesSent)
                put(task.countOfBytesExpectedToSend)
            }
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(tasks.count, forKey: .count)
        try container.encode(packed, forKey: .packed)
    }

    /// A payload of another length than `count` summaries, or a state that is none of
    /// `TaskState`'s, is a `DecodingError`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let count = try container.decode(Int.self, forKey: .count)
        if let compact = try container.decodeIfPresent(Data.self, forKey: .compact) {
            do throws(CompactSummaryPacking.Failure) {
                tasks = try CompactSummaryPacking.unpack(compact, count: count)
            } catch .corrupt(let reason) {
                throw DecodingError.dataCorruptedError(forKey: .compact, in: container, debugDescription: reason)
            }
            form = .compact
            return
        }
        form = .fixed
        let packed = try container.decode(Data.self, forKey: .packed)
        guard count >= 0, count <= packed.count / Self.bytesPerTask, packed.count == count * Self.bytesPerTask else {
            throw DecodingError.dataCorruptedError(forKey: .packed, in: container, debugDescription: "\(packed.count) bytes do not hold \(count) task summaries of \(Self.bytesPerTask) bytes")
        }
        tasks = try packed.withUnsafeBytes { raw in
            var offset = 0
            func next() -> Int64 {
                defer { offset += 8 }
                return Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Int64.self))
            }
            var tasks: [TaskSummary] = []
            tasks.reserveCapacity(count)
            for _ in 0..<count {
                let identifier = Int(next())
                let revision = Int(next())
                let rawState = next()
                guard let state = TaskState(rawValue: Int(rawState)) else {
                    throw DecodingError.dataCorruptedError(forKey: .packed, in: container, debugDescription: "task \(identifier) has no state \(rawState)")
                }
                let received = next(), expectedToReceive = next(), sent = next(), expectedToSend = next()
                tasks.append(TaskSummary(taskIdentifier: identifier, revision: revision, state: state, countOfBytesReceived: received,
                                         countOfBytesExpectedToReceive: expectedToReceive, countOfBytesSent: sent, countOfBytesExpectedToSend: expectedToSend))
            }
            return tasks
        }
    }
}
