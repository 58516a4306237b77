import Foundation
import TransferCoding

/// The decoder written by hand for journal lines, which `JournalContents` reads through it:
/// a daemon's start-up reads a line for each of up to hundreds of thousands of tasks, and
/// the synthesized `Codable` decoding asked some 45 keys of each task line through generic
/// containers (a third of start-up). This walks each object's members once and switches on
/// the name. It decodes the task, its request, header fields and requirements itself; the
/// rest (events, responses, challenges, failures, …), rare in a journal, go through
/// `Codable` (`JSONValue.decode`). What it reads is what the synthesized conformances read:
/// the same members required (a missing one, a null one or one of another type is an
/// error; a null optional is nil; unknown members are ignored), each value read by the
/// same code as `CompactJSONDecoder` reads it (`JournalLineReaderTests` decode many lines
/// both ways and compare). A line it refuses is decoded again by `Codable`, whose error (or
/// value) is the line's, so that an unreadable line is reported as before. Stateless.
enum JournalLineReader {
    /// The line in `data`, as `RecordCoding.decode(JournalLine.self, from:)` decodes it.
    static func line(from data: Data) throws -> JournalLine {
        do { return try read(data) } catch { return try RecordCoding.decode(JournalLine.self, from: data) }
    }

    /// The line in `data`, by this decoder alone (tests compare it with `Codable`'s).
    static func read(_ data: Data) throws -> JournalLine {
        var line = JournalLine()
        try JSONValue(parsing: data).forEachMember(named: LineMember.names) { position, value in
            guard !value.isNull, let member = LineMember(rawValue: position) else { return } // every member is optional
            switch member {
            case .task: line.task = TaskRecord(fields: try taskFields(value))
            case .event: line.event = try value.decode(EventRecord.self)
            case .acknowledgedThrough: line.acknowledgedThrough = try value.uint64()
            case .counters: line.counters = try value.decode(JournalCounters.self)
            }
        }
        return line
    }

    /// A task record's fields, as `TaskFields(from:)` decodes them.
    static func taskFields(_ object: JSONValue) throws -> TaskFields {
        var fields = TaskFields(taskIdentifier: 0, kind: .download, originalRequest: RequestRecord(url: ""), createdAt: Date(timeIntervalSince1970: 0))
        try object.forEachMember(of: TaskMember.self) { member, value in
            switch member {
            case .version: fields.version = try value.int()
            case .revision: fields.revision = value.isNull ? 0 : try value.int() // `@ZeroIfAbsent`
            case .taskIdentifier: fields.taskIdentifier = try value.int()
            case .kind: fields.kind = try value.rawValue(TaskKind.self, value.string())
            case .originalRequest: fields.originalRequest = try request(value)
            case .currentURL: fields.currentURL = try value.optional { try $0.string() }
            case .taskDescription: fields.taskDescription = try value.optional { try $0.string() }
            case .priority: fields.priority = try value.float()
            case .earliestBeginDate: fields.earliestBeginDate = try value.optional { try $0.date() }
            case .state: fields.state = try value.rawValue(TaskState.self, value.int())
            case .countOfBytesReceived: fields.countOfBytesReceived = try value.int64()
            case .countOfBytesExpectedToReceive: fields.countOfBytesExpectedToReceive = try value.int64()
            case .countOfBytesSent: fields.countOfBytesSent = try value.int64()
            case .countOfBytesExpectedToSend: fields.countOfBytesExpectedToSend = try value.int64()
            case .countOfBytesClientExpectsToReceive: fields.countOfBytesClientExpectsToReceive = try value.int64()
            case .countOfBytesClientExpectsToSend: fields.countOfBytesClientExpectsToSend = try value.int64()
            case .validator: fields.validator = try value.optional { try $0.decode(Validator.self) }
            case .response: fields.response = try value.optional { try $0.decode(ResponseRecord.self) }
            case .uploadFile: fields.uploadFile = try value.optional { try $0.string() }
            case .requestBodyLength: fields.requestBodyLength = try value.optional { try $0.int64() }
            case .requestBodyReplaced: fields.requestBodyReplaced = try value.optional { try $0.bool() }
            case .uploadResumption: fields.uploadResumption = try value.optional { try $0.decode(UploadResumption.self) }
            case .createdAt: fields.createdAt = try value.date()
            case .createdInBackground: fields.createdInBackground = try value.bool()
            case .requirements: fields.requirements = try requirements(value)
            case .rateLimitedUntil: fields.rateLimitedUntil = try value.optional { try $0.date() }
            case .reportedWaitingForConnectivity: fields.reportedWaitingForConnectivity = try value.bool()
            case .delayedRequestAnswered: fields.delayedRequestAnswered = try value.bool()
            case .replacementRequest: fields.replacementRequest = try value.optional { try request($0) }
            case .pendingChallenge: fields.pendingChallenge = try value.optional { try $0.decode(ChallengeRecord.self) }
            case .authenticationFailures: fields.authenticationFailures = try value.int()
            case .pendingFailure: fields.pendingFailure = try value.optional { try $0.decode(TransferFailure.self) }
            case .retryCount: fields.retryCount = try value.int()
            case .lastError: fields.lastError = try value.optional { try $0.string() }
            case .retryCause: fields.retryCause = try value.optional { try $0.decode(RetryCause.self) }
            case .retryNotBefore: fields.retryNotBefore = try value.optional { try $0.date() }
            case .reportsResumeOffset: fields.reportsResumeOffset = try value.bool()
            case .daemonCrashes: fields.daemonCrashes = try value.optional { try $0.int() }
            case .trustDisagreements: fields.trustDisagreements = try value.optional { try $0.int() }
            case .networkProtocolName: fields.networkProtocolName = try value.optional { try $0.string() }
            case .redirectCount: fields.redirectCount = try value.optional { try $0.int() }
            }
        }
        return fields
    }

    /// A request, as `RequestRecord(from:)` decodes it.
    static func request(_ object: JSONValue) throws -> RequestRecord {
        var request = RequestRecord(url: "")
        try object.forEachMember(of: RequestMember.self) { member, value in
            switch member {
            case .url: request.url = try value.string()
            case .httpMethod: request.httpMethod = try value.string()
            case .headers:
                var headers: [HeaderField] = []
                headers.reserveCapacity(value.count)
                try value.forEachElement { headers.append(try header($0)) }
                request.headers = headers
            case .timeoutInterval: request.timeoutInterval = try value.optional { try $0.double() }
            }
        }
        return request
    }

    /// A header field, as `HeaderField(from:)` decodes it.
    static func header(_ object: JSONValue) throws -> HeaderField {
        var field = HeaderField(name: "", value: "")
        try object.forEachMember(of: HeaderMember.self) { member, value in
            switch member {
            case .name: field.name = try value.string()
            case .value: field.value = try value.string()
            }
        }
        return field
    }

    /// A task's requirements, as `TaskRequirements(from:)` decodes them: every member required.
    static func requirements(_ object: JSONValue) throws -> TaskRequirements {
        var requirements = TaskRequirements()
        try object.forEachMember(of: RequirementsMember.self) { member, value in
            switch member {
            case .allowsCellularAccess: requirements.allowsCellularAccess = try value.bool()
            case .allowsExpensiveNetworkAccess: requirements.allowsExpensiveNetworkAccess = try value.bool()
            case .allowsConstrainedNetworkAccess: requirements.allowsConstrainedNetworkAccess = try value.bool()
            case .isDiscretionary: requirements.isDiscretionary = try value.bool()
            }
        }
        return requirements
    }
}

extension TaskRecord {
    /// A record holding `fields` (`JournalLineReader`).
    init(fields: TaskFields) {
        storage = Storage(fields)
    }
}
