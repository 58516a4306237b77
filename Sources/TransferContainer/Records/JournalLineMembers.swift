import Foundation
import TransferCoding

/// The members of one kind of object `JournalLineReader` decodes by hand: an `Int` enum
/// whose cases are spelled as the record's properties (and so as their synthesized coding
/// keys), and which of them the synthesized decoding requires (those neither optional,
/// `@Indirect` nor `@ZeroIfAbsent`).
protocol JournalLineMember: RawRepresentable<Int>, CaseIterable {
    static var names: JSONMemberNames { get }
    static var required: [Self] { get }
}

extension JournalLineMember {
    /// The table of the cases' names, in order (a case's position is its raw value).
    static func makeNames() -> JSONMemberNames {
        JSONMemberNames(allCases.map { "\($0)" })
    }
}

/// `JournalLine`'s members; all optional.
enum LineMember: Int, JournalLineMember {
    case task, event, acknowledgedThrough, counters
    static let names = makeNames()
    static let required: [LineMember] = []
}

/// `TaskFields`' members, as they are declared.
enum TaskMember: Int, JournalLineMember {
    case version, revision, taskIdentifier, kind, originalRequest, currentURL, taskDescription, priority, earliestBeginDate, state
    case countOfBytesReceived, countOfBytesExpectedToReceive, countOfBytesSent, countOfBytesExpectedToSend
    case countOfBytesClientExpectsToReceive, countOfBytesClientExpectsToSend
    case validator, response, uploadFile, requestBodyLength, requestBodyReplaced, uploadResumption, createdAt, createdInBackground
    case requirements, rateLimitedUntil, reportedWaitingForConnectivity, delayedRequestAnswered, replacementRequest
    case pendingChallenge, authenticationFailures, pendingFailure, retryCount, lastError, retryCause, retryNotBefore
    case reportsResumeOffset, daemonCrashes, trustDisagreements, networkProtocolName, redirectCount
    static let names = makeNames()
    static let required: [TaskMember] = [
        .version, .taskIdentifier, .kind, .originalRequest, .priority, .state,
        .countOfBytesReceived, .countOfBytesExpectedToReceive, .countOfBytesSent, .countOfBytesExpectedToSend,
        .countOfBytesClientExpectsToReceive, .countOfBytesClientExpectsToSend,
        .createdAt, .createdInBackground, .requirements, .reportedWaitingForConnectivity, .delayedRequestAnswered,
        .authenticationFailures, .retryCount, .reportsResumeOffset,
    ]
}

/// `RequestRecord`'s members.
enum RequestMember: Int, JournalLineMember {
    case url, httpMethod, headers, timeoutInterval
    static let names = makeNames()
    static let required: [RequestMember] = [.url, .httpMethod, .headers]
}

/// `HeaderField`'s members.
enum HeaderMember: Int, JournalLineMember {
    case name, value
    static let names = makeNames()
    static let required: [HeaderMember] = [.name, .value]
}

/// `TaskRequirements`' members; all required.
enum RequirementsMember: Int, JournalLineMember {
    case allowsCellularAccess, allowsExpensiveNetworkAccess, allowsConstrainedNetworkAccess, isDiscretionary
    static let names = makeNames()
    static let required: [RequirementsMember] = allCases
}

extension JSONValue {
    /// Calls `body` with each member of this object that `Member` names (others are
    /// ignored), then throws for the first of `Member.required` it did not meet, as a keyed
    /// container does for a key it does not find.
    func forEachMember<Member: JournalLineMember>(of type: Member.Type, _ body: (Member, JSONValue) throws -> Void) throws {
        var found = RequiredMembers()
        try forEachMember(named: Member.names) { position, value in
            guard let member = Member(rawValue: position) else { return }
            found.insert(member)
            try body(member, value)
        }
        try found.check(Member.self, in: self)
    }
}

/// The members of one object a hand-written decoder has met, to find a required one that
/// is missing. A bit set (no enum has more than 64 cases).
private struct RequiredMembers {
    private var found: UInt64 = 0

    mutating func insert<Member: JournalLineMember>(_ member: Member) {
        found |= 1 << UInt64(member.rawValue)
    }

    /// Throws for the first of `Member.required` not met, as a keyed container does for a
    /// key it does not find.
    func check<Member: JournalLineMember>(_ type: Member.Type, in object: JSONValue) throws(JournalLineReadError) {
        for member in Member.required where found & (1 << UInt64(member.rawValue)) == 0 {
            throw .missing(member: "\(member)", codingPath: object.codingPath.map(\.stringValue))
        }
    }
}

/// Why `JournalLineReader` refused a line (which `Codable` then decodes again for the
/// line's own error): where in the line, as member names from the top.
enum JournalLineReadError: Error, CustomStringConvertible {
    case missing(member: String, codingPath: [String])
    case invalidRawValue(type: String, value: String, codingPath: [String])

    var description: String {
        switch self {
        case .missing(let member, let path): "no member \"\(member)\" in \(path.joined(separator: "."))"
        case .invalidRawValue(let type, let value, let path): "\(value) is not a \(type), at \(path.joined(separator: "."))"
        }
    }
}

extension JSONValue {
    /// nil for null, else the value `read` reads: how synthesized decoding reads an optional.
    func optional<T>(_ read: (JSONValue) throws -> T) rethrows -> T? {
        isNull ? nil : try read(self)
    }

    /// The case of a raw-value enum `raw` names, as its synthesized `init(from:)` decodes it.
    func rawValue<Value: RawRepresentable>(_ type: Value.Type, _ raw: Value.RawValue) throws(JournalLineReadError) -> Value {
        guard let value = Value(rawValue: raw) else {
            throw .invalidRawValue(type: "\(Value.self)", value: "\(raw)", codingPath: codingPath.map(\.stringValue))
        }
        return value
    }
}
