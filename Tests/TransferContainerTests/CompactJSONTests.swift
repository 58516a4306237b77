import Foundation
import Testing
import TransferContainer
import TransferCoding

// MARK: Helpers

/// Whether two JSON texts hold the same value: the same members in any order, numbers
/// equal as numbers (`100` and `100.0`).
func sameJSON(_ one: Data, _ other: Data) throws -> Bool {
    let parse = { (data: Data) in try JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed) as! NSObject }
    return try parse(one).isEqual(parse(other))
}

/// Foundation's compact JSON of a value, the reference every text is compared with.
func foundationJSON<T: Encodable>(_ value: T) throws -> Data {
    try RecordCoding.encoder(pretty: false).encode(value)
}

/// Our encoder writes the same JSON value as Foundation's; Foundation's decoder reads ours as
/// it reads its own; ours reads Foundation's (compact and pretty) and its own, each to a value
/// that Foundation encodes as it encoded the original.
func checkAgreement<T: Codable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let reference = try foundationJSON(value)
    let ours = try CompactJSONEncoder().encode(value)
    #expect(try sameJSON(ours, reference), "ours: \(String(decoding: ours, as: UTF8.self))\nFoundation's: \(String(decoding: reference, as: UTF8.self))", sourceLocation: sourceLocation)
    #expect(try sameJSON(foundationJSON(RecordCoding.decoder().decode(T.self, from: ours)), reference), "Foundation reading ours", sourceLocation: sourceLocation)
    for text in [ours, reference, try RecordCoding.encoder(pretty: true).encode(value)] {
        let read = try CompactJSONDecoder().decode(T.self, from: text)
        #expect(try sameJSON(foundationJSON(read), reference), "ours reading \(String(decoding: text, as: UTF8.self))", sourceLocation: sourceLocation)
    }
}

/// `checkAgreement`, and every reading equal to the value itself.
func checkRoundTrips<T: Codable & Equatable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
    try checkAgreement(value, sourceLocation: sourceLocation)
    let ours = try CompactJSONEncoder().encode(value)
    #expect(try RecordCoding.decoder().decode(T.self, from: ours) == value, sourceLocation: sourceLocation)
    #expect(try CompactJSONDecoder().decode(T.self, from: ours) == value, sourceLocation: sourceLocation)
    #expect(try CompactJSONDecoder().decode(T.self, from: foundationJSON(value)) == value, sourceLocation: sourceLocation)
    #expect(try CompactJSONDecoder().decode(T.self, from: RecordCoding.encoder(pretty: true).encode(value)) == value, sourceLocation: sourceLocation)
}

/// A coding key from a string literal.
struct AnyKey: CodingKey, ExpressibleByStringLiteral {
    let stringValue: String
    let intValue: Int?
    init(stringValue: String) { (self.stringValue, intValue) = (stringValue, nil) }
    init(intValue: Int) { (stringValue, self.intValue) = (String(intValue), intValue) }
    init(stringLiteral value: String) { self.init(stringValue: value) }
}

/// Any JSON value, read through the decoding containers: what a decoder accepts whatever the type.
indirect enum AnyJSON: Decodable, Equatable {
    case null, bool(Bool), number(Double), string(String), array([AnyJSON]), object([String: AnyJSON])

    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var members: [String: AnyJSON] = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(AnyJSON.self, forKey: key) }
            self = .object(members)
        } else if var array = try? decoder.unkeyedContainer() {
            var elements: [AnyJSON] = []
            while !array.isAtEnd { elements.append(try array.decode(AnyJSON.self)) }
            self = .array(elements)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let bool = try? single.decode(Bool.self) {
                self = .bool(bool)
            } else if let string = try? single.decode(String.self) {
                self = .string(string)
            } else {
                self = .number(try single.decode(Double.self))
            }
        }
    }
}

func decodeAny(_ bytes: [UInt8]) throws -> AnyJSON {
    try CompactJSONDecoder().decode(AnyJSON.self, from: Data(bytes))
}

// MARK: Sample values

/// A task with every optional field set and no field at its default.
func everyFieldTask() -> TaskRecord {
    var task = sampleTask(7)
    task.revision = 12
    task.state = .canceling
    task.countOfBytesSent = 10
    task.countOfBytesExpectedToSend = 20
    task.countOfBytesClientExpectsToReceive = 30
    task.countOfBytesClientExpectsToSend = 40
    task.uploadFile = "/tmp/up load/7.bin"
    task.uploadResumption = UploadResumption(location: "http://127.0.0.1:8080/uploads/7", interopVersion: 6)
    task.createdInBackground = true
    task.requirements = TaskRequirements(allowsCellularAccess: false, allowsExpensiveNetworkAccess: false, allowsConstrainedNetworkAccess: false, isDiscretionary: true)
    task.rateLimitedUntil = exactDate.addingTimeInterval(600)
    task.reportedWaitingForConnectivity = true
    task.delayedRequestAnswered = true
    task.replacementRequest = RequestRecord(url: "http://127.0.0.1:8080/replaced/7", httpMethod: "PUT", headers: [HeaderField(name: "Authorization", value: "Bearer x")], timeoutInterval: 12.25)
    task.pendingChallenge = ChallengeRecord(protectionSpace: ProtectionSpaceRecord(host: "127.0.0.1", port: 8080, protocol: "http", realm: "vault", method: .digest, isProxy: true),
                                            previousFailureCount: 1, proposedUser: "alice")
    task.authenticationFailures = 1
    task.pendingFailure = TransferFailure(code: TransferFailure.unsupportedURL, message: "unsupported URL", subject: "ftp://x", backgroundTaskCancelledReason: 1, resumeData: Data("resume".utf8))
    task.retryNotBefore = exactDate.addingTimeInterval(30)
    task.reportsResumeOffset = true
    return task
}

/// A task with no optional field set.
let bareTask = TaskRecord(taskIdentifier: 1, kind: .upload, originalRequest: RequestRecord(url: "http://x/"), createdAt: exactDate)

let everyRequest: [DaemonRequest] = {
    let hello = ClientHello(identity: AppIdentity(bundleIdentifier: sampleOwner, kind: .appExtension, containingApp: sampleFamily, containingAppExecutable: "host-app", appGroups: [sampleGroup]),
                            executablePath: "/usr/local/bin/fetch-extension", processName: "fetch-extension", isForeground: false)
    var creation = TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:8080/a b?q=ü", headers: [HeaderField(name: "Range", value: "bytes=0-")]),
                                taskDescription: "described", priority: 0.25, earliestBeginDate: exactDate, resumeData: Data([1, 2, 3]), requirements: TaskRequirements(isDiscretionary: true))
    creation.taskIdentifier = 5
    let credential = CredentialRecord(user: "alice", password: "p\"w\\rd", persistence: .forSession)
    return [.hello(hello), .openSession(identifier: sampleSession, configuration: sampleSessionRecord().configuration, launchedForEvents: true),
            .createTask(session: sampleSession, creation), .resumeTask(session: sampleSession, task: 1), .suspendTask(session: sampleSession, task: 2),
            .cancelTask(session: sampleSession, task: 3, produceResumeData: true), .setTaskProperties(session: sampleSession, task: 4, TaskProperties(of: everyFieldTask())),
            .answerDelayedRequest(session: sampleSession, task: 1, .continueLoading), .answerDelayedRequest(session: sampleSession, task: 1, .useNewRequest(RequestRecord(url: "http://y/"))),
            .answerDelayedRequest(session: sampleSession, task: 1, .cancel), .getAllTasks(session: sampleSession), .getTasks(session: sampleSession, identifiers: [1, 2, 3]),
            .acknowledge(session: sampleSession, through: .max), .invalidate(session: sampleSession, cancelTasks: false), .closeSession(session: sampleSession), .ping,
            .forceQuit(app: sampleFamily), .watch, .answerChallenge(session: sampleSession, task: 1, ChallengeAnswer(disposition: .useCredential, credential: credential)),
            .answerChallenge(session: sampleSession, task: 1, ChallengeAnswer(disposition: .rejectProtectionSpace, credential: nil)),
            .answerRetryHeaders(session: sampleSession, task: 1, [HeaderField(name: "X-Token", value: "2")]), .answerRetryHeaders(session: sampleSession, task: 1, nil), .conditionsChanged]
}()

let everyDaemonFrame: [DaemonFrame] = {
    let failure = TransferFailure(code: TransferFailure.backgroundSessionInUseByAnotherProcess, message: "in use", subject: "x")
    let replies: [DaemonReply] = [.ok, .welcome(daemonPID: 1234), .sessionOpened(tasks: [everyFieldTask(), bareTask], nextTaskIdentifier: 9), .task(everyFieldTask()), .tasks([]),
                                  .taskSummaries(TaskSummaries([TaskSummary(of: everyFieldTask()), TaskSummary(of: bareTask)])), .forceQuitDone(cancelledTasks: 2, terminatedProcesses: [10, 11]),
                                  .cancelled(resumeData: Data("resume".utf8)), .cancelled(resumeData: nil), .failure(failure)]
    let status = TransferStatus(family: sampleFamily, session: sampleSession, taskIdentifier: 3, kind: .download, state: .running, url: "http://x/3", taskDescription: nil,
                                bytesDone: 5, bytesExpected: -1, isTransferring: true, retryCount: 0)
    let progress = TaskProgress(taskIdentifier: 3, bytesWritten: 10, totalBytesWritten: 20, totalBytesExpectedToWrite: -1, state: .running, currentURL: "http://x/3",
                                response: ResponseRecord(url: "http://x/3", statusCode: 206, headers: ["Content-Range": "bytes 0-9/*", "ETag": "\"e\""]))
    let pushes: [DaemonPush] = [.event(session: sampleSession, sampleEvent(9, task: everyFieldTask())), .event(session: sampleSession, EventRecord(number: 1, kind: .taskCompleted, createdAt: exactDate, task: bareTask)),
                                .progress(session: sampleSession, progress), .didResume(session: sampleSession, taskIdentifier: 1, offset: 10, expectedTotalBytes: -1),
                                .waitingForConnectivity(session: sampleSession, taskIdentifier: 1), .delayedRequest(session: sampleSession, everyFieldTask()), .challenge(session: sampleSession, everyFieldTask()),
                                .retryHeaders(session: sampleSession, bareTask), .backlogDelivered(session: sampleSession, through: 5), .invalidated(session: sampleSession, nil),
                                .invalidated(session: sampleSession, failure), .transfers([status, status])]
    return replies.enumerated().map { .reply(id: UInt64($0.offset), $0.element) } + pushes.map { .push($0) }
}()

// MARK: Tests

@Suite("Compact JSON coder")
struct CompactJSONTests {
    @Test("our records round-trip between our coder and Foundation's, both ways, compact and pretty")
    func records() throws {
        try checkRoundTrips(everyFieldTask())
        try checkRoundTrips(bareTask)
        try checkRoundTrips(sampleEvent(3, task: everyFieldTask()))
        try checkRoundTrips(EventRecord(number: 1, kind: .taskCompleted, createdAt: exactDate, task: bareTask))
        try checkRoundTrips(sampleSessionRecord())
        try checkRoundTrips(SessionRecord(identifier: sampleSession, owner: sampleOwner, family: sampleFamily, configuration: SessionConfiguration(), createdAt: exactDate))
        try checkRoundTrips(TaskSummaries([TaskSummary(of: everyFieldTask()), TaskSummary(of: bareTask)]))
        for line in [JournalLine.task(everyFieldTask()), .task(bareTask), .event(sampleEvent(2)), .acknowledged(through: 41), .counters(JournalCounters(nextTaskIdentifier: 8, nextEventNumber: 3))] {
            try checkRoundTrips(line)
        }
    }

    @Test("every request and every daemon frame agrees with Foundation")
    func frames() throws {
        for (index, request) in everyRequest.enumerated() { try checkAgreement(RequestFrame(id: UInt64(index), request: request)) }
        for frame in everyDaemonFrame { try checkAgreement(frame) }
        for request in everyRequest { try checkAgreement(request) }
    }

    @Test("a record written before a field existed still reads (a missing key takes the field's default)")
    func oldRecords() throws {
        var json = try JSONSerialization.jsonObject(with: foundationJSON(bareTask)) as! [String: Any]
        json["revision"] = nil
        let old = try JSONSerialization.data(withJSONObject: json)
        #expect(try CompactJSONDecoder().decode(TaskRecord.self, from: old) == bareTask)
    }

    @Test("strings: only quotes, backslashes and control characters are escaped; anything else is written as UTF-8 and reads back")
    func strings() throws {
        let awkward = ["", "quote \" backslash \\ slash / done", "\u{0}\u{1}\u{8}\u{9}\u{A}\u{C}\u{D}\u{1F}\u{7F}", "emoji 😀👩‍👩‍👧 U+2028 \u{2028} U+2029 \u{2029}",
                       "ünïcödé 中文", "\\u0041 is not an escape here", "</script>", String(repeating: "long and plain ", count: 100)]
        try checkRoundTrips(awkward)
        let text = String(decoding: try CompactJSONEncoder().encode(awkward), as: UTF8.self)
        #expect(text.contains("slash / done"))
        #expect(text.contains("😀👩‍👩‍👧") && text.contains("\u{2028}") && text.contains("中文"))
        #expect(text.contains(#""\u0000\u0001\b\t\n\f\r\u001f\#u{7F}""#))
        #expect(text.contains(#"quote \" backslash \\ slash"#))

        let escapes = Data(#"["\u0041\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\", "\u2028"]"#.utf8)
        let expected = ["Aé😀/\u{8}\u{C}\n\r\t\"\\", "\u{2028}"]
        #expect(try CompactJSONDecoder().decode([String].self, from: escapes) == expected)
        #expect(try RecordCoding.decoder().decode([String].self, from: escapes) == expected)
        // A member name with an escape is the same name.
        let line = Data(#"{"\u0061cknowledgedThrough":5}"#.utf8)
        #expect(try CompactJSONDecoder().decode(JournalLine.self, from: line) == .acknowledged(through: 5))
    }

    @Test("numbers: the edges of Int64 and UInt64, negative zero, exponents, floats")
    func numbers() throws {
        struct Numbers: Codable, Equatable {
            var signed: [Int64] = [.min, .min + 1, -1, 0, 1, .max]
            var unsigned: [UInt64] = [0, 1, .max]
            var small: [Int8] = [.min, .max]
            var doubles: [Double] = [0, 1, 100, 0.1, 0.5, 1e-5, 1e20, 1e300, -1e-300, .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 123456.789, 1 / 3]
            var floats: [Float] = [0, 0.1, 0.75, 16_777_216, .greatestFiniteMagnitude, .leastNonzeroMagnitude, -0.5, 1 / 3]
        }
        try checkRoundTrips(Numbers())
        let negativeZero = try CompactJSONDecoder().decode([Double].self, from: CompactJSONEncoder().encode([-0.0]))
        #expect(negativeZero[0] == 0 && negativeZero[0].sign == .minus)

        let literals: [(String, Double)] = [("1e2", 100), ("1E+2", 100), ("-1.5e-3", -0.0015), ("0.1", 0.1), ("-0", -0.0), ("-0.0", -0.0), ("0e999", 0), ("4.9e-324", .leastNonzeroMagnitude),
                                            ("123456789012345678901234567890", 1.2345678901234568e29), ("9007199254740993", 9007199254740992), ("0.30000000000000004", 0.30000000000000004),
                                            ("2.2250738585072011e-308", Double.leastNormalMagnitude.nextDown), ("1.7976931348623157e308", .greatestFiniteMagnitude)]
        for (literal, expected) in literals {
            let ours = try CompactJSONDecoder().decode(Double.self, from: Data(literal.utf8))
            let foundation = try RecordCoding.decoder().decode(Double.self, from: Data(literal.utf8))
            #expect(ours == expected && ours.sign == expected.sign, "\(literal)")
            #expect(ours == foundation && ours.sign == foundation.sign, "\(literal)")
        }
        #expect(try CompactJSONDecoder().decode(Float.self, from: Data("0.1".utf8)) == 0.1)
        #expect(try CompactJSONDecoder().decode(Int64.self, from: Data("-9223372036854775808".utf8)) == .min)
        #expect(try CompactJSONDecoder().decode(UInt64.self, from: Data("18446744073709551615".utf8)) == .max)
        #expect(try CompactJSONDecoder().decode(UInt.self, from: Data("-0".utf8)) == 0)
        #expect(try CompactJSONDecoder().decode(Int8.self, from: Data("-128".utf8)) == -128)

        func refused<T: Decodable>(_ type: T.Type, _ literal: String) {
            #expect(throws: DecodingError.self, "\(literal) as \(T.self)") { try CompactJSONDecoder().decode(T.self, from: Data(literal.utf8)) }
        }
        refused(Int.self, "9223372036854775808")
        refused(Int.self, "-9223372036854775809")
        refused(UInt64.self, "18446744073709551616")
        refused(UInt.self, "-1")
        refused(Int8.self, "128")
        refused(Int8.self, "-129")
        refused(Int.self, "1e2")
        refused(Int.self, "1.0")
        refused(Int.self, "1e999999999")
        refused(Int.self, String(repeating: "9", count: 10_000))
        refused(Double.self, "1e999999999")
        refused(Double.self, "1e400")
        refused(Double.self, "2e-324") // not 0, yet rounds to 0: Foundation refuses it too
        refused(Float.self, "1e39")
        refused(Float.self, "1e-50")
        refused(Int.self, "\"1\"")
        refused(Bool.self, "1")
        refused(String.self, "1")
    }

    @Test("dates, data and URLs are written as Foundation writes them as RecordCoding configures it; dates are exact to the millisecond")
    func specialTypes() throws {
        struct Special: Codable, Equatable {
            var dates: [Date]
            var data = [Data(), Data([0, 1, 2, 254, 255]), Data(repeating: 7, count: 100)]
            var urls = [URL(string: "http://example.com/a%20b?q=1#f")!, URL(fileURLWithPath: "/tmp/with space")]
            var optionalDate: Date? = nil
        }
        let dates = [exactDate, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_700_000_000.999), Date(timeIntervalSince1970: 951_782_400.5), // 2000-02-29
                     Date(timeIntervalSince1970: 253_402_300_799.999), Date(timeIntervalSince1970: -1.5)]
        try checkRoundTrips(Special(dates: dates))
        try checkRoundTrips(Special(dates: [], optionalDate: exactDate))

        // By hand as the format style wrote them: the whole seconds by Foundation, the milliseconds after.
        let style = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!)
        var random = SeededGenerator(seed: 8601)
        for _ in 0..<2_000 {
            let milliseconds = Int64.random(in: 0..<253_402_300_800_000, using: &random)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            var expected = style.format(Date(timeIntervalSince1970: Double(milliseconds / 1000)))
            expected.removeLast()
            expected += String(format: ".%03dZ", Int(milliseconds % 1000))
            #expect(ISO8601Format.string(from: date) == expected)
            #expect(ISO8601Format.date(from: expected) == date)
        }
        #expect(ISO8601Format.date(from: "2024-02-29T23:59:59.999Z") == Date(timeIntervalSince1970: 1_709_251_199.999))
        #expect(ISO8601Format.date(from: "2023-11-14T22:13:20Z") == Date(timeIntervalSince1970: 1_700_000_000))
        // Dates an app may make (a far future, NaN) are written as the nearest a record holds.
        #expect(ISO8601Format.string(from: Date(timeIntervalSince1970: 1e300)) == "9999-12-31T23:59:59.999Z")
        #expect(ISO8601Format.string(from: Date(timeIntervalSince1970: .infinity)) == "9999-12-31T23:59:59.999Z")
        for seconds in [-1e300, -.infinity, .nan] {
            let text = ISO8601Format.string(from: Date(timeIntervalSince1970: seconds))
            #expect(text.hasPrefix("0001-01-0") && ISO8601Format.date(from: text) != nil, "\(seconds): \(text)")
        }
        #expect(ISO8601Format.date(from: ISO8601Format.string(from: Date(timeIntervalSince1970: 1e300))) == Date(timeIntervalSince1970: 253_402_300_799.999))

        var json = try JSONSerialization.jsonObject(with: foundationJSON(bareTask)) as! [String: Any]
        json["createdAt"] = "yesterday"
        let error = try #require(throws: DecodingError.self) { try CompactJSONDecoder().decode(TaskRecord.self, from: JSONSerialization.data(withJSONObject: json)) }
        guard case .dataCorrupted(let context) = error else { Issue.record("\(error)"); return }
        #expect(context.debugDescription == "not an ISO 8601 date: yesterday")
        #expect(context.codingPath.map(\.stringValue) == ["createdAt"])
        #expect(throws: DecodingError.self) { try CompactJSONDecoder().decode(Data.self, from: Data("\"!!\"".utf8)) }
        #expect(throws: DecodingError.self) { try CompactJSONDecoder().decode(URL.self, from: Data("\"\"".utf8)) }
    }

    @Test("containers: dictionaries of each kind of key, enums with payloads, super encoders, classes, values that encode nothing")
    func containers() throws {
        try checkRoundTrips([1: "one", -2: "minus two"])
        try checkRoundTrips(["a": [1, 2], "b": []])
        try checkRoundTrips(["outer": ["inner": TaskKind.upload]])
        // Keyed by a double: an array of keys and values, in the order of the dictionary at hand.
        let keyedByDouble = [1.5: "one and a half", 2.5: "two and a half", -0.25: "less"]
        #expect(try sameJSON(CompactJSONEncoder().encode(keyedByDouble), foundationJSON(keyedByDouble)))
        #expect(try CompactJSONDecoder().decode([Double: String].self, from: foundationJSON(keyedByDouble)) == keyedByDouble)
        #expect(try RecordCoding.decoder().decode([Double: String].self, from: CompactJSONEncoder().encode(keyedByDouble)) == keyedByDouble)
        try checkRoundTrips([[String?]]([["a", nil], [], [nil]]))
        try checkRoundTrips([DelayedRequestAnswer.continueLoading, .useNewRequest(RequestRecord(url: "http://z/")), .cancel])

        struct Silent: Codable, Equatable {
            init() {}
            init(from decoder: any Decoder) throws {}
            func encode(to encoder: any Encoder) throws {}
        }
        try checkRoundTrips([Silent(), Silent()])
        #expect(String(decoding: try CompactJSONEncoder().encode(["a": Silent()]), as: UTF8.self) == #"{"a":{}}"#)
        #expect(throws: EncodingError.self, "at the top level, as with Foundation") { try CompactJSONEncoder().encode(Silent()) }

        let derived = Derived()
        derived.base = 3
        derived.derived = 4
        try checkAgreement(derived)
        let read = try CompactJSONDecoder().decode(Derived.self, from: CompactJSONEncoder().encode(derived))
        #expect(read.base == 3 && read.derived == 4 && read.shared == "shared")
        try checkAgreement(InOrder())
    }

    @Test("containers used out of stack order are encoded again by Foundation: the same JSON, never a wrong one")
    func outOfOrder() throws {
        let data = try CompactJSONEncoder().encode(OutOfOrder())
        #expect(try sameJSON(data, foundationJSON(OutOfOrder())))
        let members = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        #expect(members["super"] as? Int == 5)
        #expect((members["first"] as? [String: Int]) == ["one": 1, "three": 3])
    }

    @Test("a member whose encoding throws, caught by its container's owner, leaves nothing behind")
    func forgiving() throws {
        // Not compared with Foundation, whose encoder stops the process here.
        #expect(String(decoding: try CompactJSONEncoder().encode(Forgiving()), as: UTF8.self) == #"{"a":1,"b":2}"#)
    }

    @Test("numbers JSON cannot hold, and containers asked for twice as different kinds, are errors, not crashes")
    func encodingErrors() throws {
        for value in [Double.nan, .infinity, -.infinity] {
            let error = try #require(throws: EncodingError.self) { try CompactJSONEncoder().encode(["list": [1, value]]) }
            #expect("\(error)".contains("list[1]"), "\(error)")
        }
        #expect(throws: EncodingError.self) { try CompactJSONEncoder().encode([Float.nan]) }
        #expect(throws: EncodingError.self) { try CompactJSONEncoder().encode(Confused()) }
    }

    @Test("the decoding containers answer as Foundation's: allKeys, contains, decodeNil, decodeIfPresent, nested containers, super decoders, arrays")
    func decodingContainers() throws {
        let texts = [#"{"a":1,"b":"two","null":null,"list":[1,null,"x",2.5,{"k":[]},true],"nested":{"n":-3,"super":{"s":1}},"super":7,"extra":{"ignored":[1,{}]}}"#,
                     #"{"list":[],"nested":{}}"#]
        for text in texts {
            let ours = try CompactJSONDecoder().decode(Probe.self, from: Data(text.utf8)).log
            let foundation = try RecordCoding.decoder().decode(Probe.self, from: Data(text.utf8)).log
            #expect(ours.count == foundation.count)
            for (mine, theirs) in zip(ours, foundation) {
                // Where a number does not fit, Foundation throws an error of its own rather than
                // a DecodingError (so without a coding path); ours is a DecodingError with one.
                let foundationInternal = /error numberIsNotRepresentableInSwift\(parsed: "[^"]*"\)/
                #expect(mine == theirs || mine.replacing(/error at \[[^\]]*\]/, with: "error") == theirs.replacing(foundationInternal, with: "error"), "\(text)")
            }
        }
    }

    @Test("a value of the wrong type is an error that names its coding path")
    func codingPaths() throws {
        var json = try JSONSerialization.jsonObject(with: foundationJSON(everyFieldTask())) as! [String: Any]
        let cases: [(String, (inout [String: Any]) -> Void, [String])] = [
            ("revision", { $0["revision"] = "x" }, ["revision"]),
            ("taskIdentifier", { $0["taskIdentifier"] = 1.5 }, ["taskIdentifier"]),
            ("kind", { $0["kind"] = "sideways" }, ["kind"]),
            ("originalRequest", { $0["originalRequest"] = [] as [Any] }, ["originalRequest"]),
            ("header name", { json in
                var request = json["originalRequest"] as! [String: Any]
                var headers = request["headers"] as! [[String: Any]]
                headers[1]["name"] = 7
                request["headers"] = headers
                json["originalRequest"] = request
            }, ["originalRequest", "headers", "Index 1", "name"]),
            ("response header", { json in
                var response = json["response"] as! [String: Any]
                response["headers"] = ["Content-Length": 5678]
                json["response"] = response
            }, ["response", "headers", "Content-Length"]),
            ("missing", { $0["createdAt"] = nil }, []),
        ]
        let original = json
        for (label, change, path) in cases {
            json = original
            change(&json)
            let data = try JSONSerialization.data(withJSONObject: json)
            let error = try #require(throws: DecodingError.self, "\(label)") { try CompactJSONDecoder().decode(TaskRecord.self, from: data) }
            #expect(throws: DecodingError.self, "Foundation refuses it too: \(label)") { try RecordCoding.decoder().decode(TaskRecord.self, from: data) }
            let context: DecodingError.Context
            switch error {
            case .typeMismatch(_, let found), .valueNotFound(_, let found), .dataCorrupted(let found): context = found
            case .keyNotFound(let key, let found):
                #expect(key.stringValue == "createdAt")
                context = found
            @unknown default: Issue.record("\(error)"); continue
            }
            #expect(context.codingPath.map(\.stringValue) == path, "\(label): \(error)")
            for name in path where !name.hasPrefix("Index ") { #expect("\(error)".contains(name), "\(label): \(error)") }
        }
    }

    @Test("hostile input is refused with a DecodingError, never a crash")
    func hostileInput() throws {
        var texts = ["", " ", "{", "[", "[1", "{\"a\"", "{\"a\":", "{\"a\":1", "\"abc", "tru", "nul", "-", "1.", "1e", "1e+", "01", "-01", "+1", ".5", "0x10",
                     "[1,2,]", "{\"a\":1,}", "[,1]", "{,}", "[1,,2]", "{\"a\" 1}", "{\"a\":1 \"b\":2}", "{1:2}", "NaN", "Infinity", "-Infinity", "[1]x", "[1] [2]",
                     "{'a':1}", "/*c*/1", "1 // c", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800\\ud800\"",
                     "\"\\ud800\\", "\"a\tb\"", "\"a\nb\"", "\u{FEFF}1", "{\"a\":1,\"a\":2}", "{\"a\":1,\"\\u0061\":2}", "[1]\u{0}", "\u{0}",
                     String(repeating: "[", count: 100_000), String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000),
                     String(repeating: "{\"a\":", count: 100_000) + "1" + String(repeating: "}", count: 100_000),
                     String(repeating: "[", count: 513) + String(repeating: "]", count: 513)]
        texts += ["true", "false", "null"].flatMap { literal in (1..<literal.count).map { String(literal.prefix($0)) } }
        var byteCases: [[UInt8]] = [[0x22, 0xFF, 0x22], [0x22, 0xC0, 0x80, 0x22], [0x22, 0xC1, 0xBF, 0x22], [0x22, 0xE0, 0x80, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
                                    [0x22, 0xF0, 0x80, 0x80, 0x80, 0x22], [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22],
                                    [0x22, 0x80, 0x22], [0x22, 0xC3], [0x22, 0xF0, 0x9F, 0x98], [0xFE, 0xFF, 0x00, 0x31]]
        byteCases += texts.map { Array($0.utf8) }
        for bytes in byteCases {
            #expect(throws: DecodingError.self, "\(String(decoding: bytes.prefix(40), as: UTF8.self))") { try decodeAny(bytes) }
        }
        #expect(try decodeAny(Array((String(repeating: "[", count: 512) + String(repeating: "]", count: 512)).utf8)) != .null, "512 deep is allowed, as with Foundation")
        #expect(try decodeAny(Array(" \t\r\n{\"a\":[1,{\"b\":null}]} \n".utf8)) == .object(["a": .array([.number(1), .object(["b": .null])])]))
        #expect(try decodeAny(Array("\"\\u0000\"".utf8)) == .string("\u{0}"))

        // Every truncation of a real frame is refused.
        let frame = try CompactJSONEncoder().encode(DaemonFrame.push(.event(session: sampleSession, sampleEvent(3, task: everyFieldTask()))))
        for length in 0..<frame.count {
            #expect(throws: DecodingError.self, "\(length) bytes") { try CompactJSONDecoder().decode(DaemonFrame.self, from: frame.prefix(length)) }
        }
        // Wrong types where a frame has numbers, strings and objects.
        for text in [#"{"id":"1","request":{"ping":{}}}"#, #"{"id":1e999999999,"request":{"ping":{}}}"#, #"{"id":-1,"request":{"ping":{}}}"#,
                     #"{"id":1,"request":{"ping":[]}}"#, #"{"id":1,"request":{"ping":{},"watch":{}}}"#, #"{"id":1,"request":{"resumeTask":{"session":"../x","task":1}}}"#,
                     #"{"id":1,"request":{"resumeTask":{"session":"s","task":true}}}"#, #"{"id":1,"request":{"nonsense":{}}}"#, #"{"id":1}"#, "[]", "null"] {
            #expect(throws: DecodingError.self, "\(text)") { try CompactJSONDecoder().decode(RequestFrame.self, from: Data(text.utf8)) }
            #expect(throws: DecodingError.self, "Foundation refuses it too: \(text)") { try RecordCoding.decoder().decode(RequestFrame.self, from: Data(text.utf8)) }
        }
    }

    @Test("4,000 mutations of a real frame: never a crash; Foundation and ours accept and refuse alike, but for what RFC 8259 forbids and Foundation allows")
    func fuzz() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["BGTRANSFER_FUZZ_SEED"] ?? "") ?? 0x5EED_C0DE
        var random = SeededGenerator(seed: seed)
        let frame = DaemonFrame.push(.event(session: sampleSession, sampleEvent(3, task: everyFieldTask())))
        let originals = [try CompactJSONEncoder().encode(frame), try foundationJSON(frame)]
        let interesting = Array("\"\\{}[],:0123456789-+.eE tfnu/ ".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC3, 0xE2, 0xED, 0xF0, 0xFF]
        var outcomes = (accepted: 0, refused: 0, lenientFoundation: 0)
        for iteration in 0..<4_000 {
            var bytes = [UInt8](originals[iteration % 2])
            for _ in 0...Int.random(in: 0..<3, using: &random) {
                let position = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<6, using: &random) {
                case 0: bytes[position] = UInt8.random(in: 0...255, using: &random)
                case 1: bytes[position] = interesting.randomElement(using: &random)!
                case 2: bytes.remove(at: position)
                case 3: bytes.insert(interesting.randomElement(using: &random)!, at: position)
                case 4: bytes.removeSubrange(position...)
                default:
                    let end = min(bytes.count, position + Int.random(in: 1...40, using: &random))
                    bytes.insert(contentsOf: bytes[position..<end], at: Int.random(in: 0...bytes.count, using: &random))
                }
                if bytes.isEmpty { bytes = [0x7B] }
            }
            let data = Data(bytes)
            let ours = Result { try CompactJSONDecoder().decode(DaemonFrame.self, from: data) }
            let foundation = Result { try RecordCoding.decoder().decode(DaemonFrame.self, from: data) }
            let label = "seed \(seed), iteration \(iteration): \(String(decoding: bytes, as: UTF8.self))"
            switch (ours, foundation) {
            case (.success(let mine), .success(let theirs)):
                outcomes.accepted += 1
                #expect(try sameJSON(foundationJSON(mine), foundationJSON(theirs)), "\(label)")
            case (.success, .failure(let error)):
                Issue.record("ours accepted what Foundation refuses (\(error)): \(label)")
            case (.failure(let error), .success(let theirs)):
                outcomes.lenientFoundation += 1
                #expect(try foundationIsLenient(bytes, ours: error, theirs: theirs), "\(error): \(label)")
            case (.failure(let error), .failure):
                outcomes.refused += 1
                #expect(error is DecodingError, "\(label)")
            }
        }
        #expect(outcomes.accepted > 100 && outcomes.refused > 100, "\(outcomes)")
    }
}

/// Whether Foundation accepting a frame that ours refuses with `error` is one of its known
/// leniencies. Foundation allows trailing commas, a byte order mark, a repeated member name
/// (it takes the first), and an integer written with a fraction or an exponent. It also checks
/// the contents of a string only when it decodes it: one it skips (an unknown member's value
/// or name) may hold invalid UTF-8, control characters or bad escapes. For those, the string
/// is made plain and both decoders are asked again: Foundation must read the same frame, and
/// ours must now read it too (or refuse it for another of these reasons).
func foundationIsLenient(_ bytes: [UInt8], ours error: any Error, theirs: DaemonFrame, repairs: Int = 0) throws -> Bool {
    let reason = "\(error)"
    if ["a trailing comma", "a byte order mark", "a second member named", "not an integer literal"].contains(where: reason.contains) { return true }
    guard repairs < 4, ["invalid UTF-8", "a control character in a string", "an invalid escape", "surrogate", "\\u without"].contains(where: reason.contains),
          let match = reason.firstMatch(of: /at byte (\d+)/), let offset = Int(match.1),
          let open = bytes[..<offset].lastIndex(where: { $0 == UInt8(ascii: "\"") }) else { return false }
    var index = offset + 1
    while index < bytes.count && bytes[index] != UInt8(ascii: "\"") { index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1 }
    guard index < bytes.count else { return false }
    var repaired = bytes
    repaired.replaceSubrange((open + 1)..<index, with: repeatElement(UInt8(ascii: "x"), count: index - open - 1))
    let foundationAgain = try RecordCoding.decoder().decode(DaemonFrame.self, from: Data(repaired))
    guard try sameJSON(foundationJSON(foundationAgain), foundationJSON(theirs)) else { return false }
    do {
        return try sameJSON(foundationJSON(CompactJSONDecoder().decode(DaemonFrame.self, from: Data(repaired))), foundationJSON(theirs))
    } catch {
        return try foundationIsLenient(repaired, ours: error, theirs: theirs, repairs: repairs + 1)
    }
}

// MARK: Types with hand-written Codable conformances

/// Uses containers in stack order in every way streaming allows: nested containers finished
/// before the next member, super encoders used at once, containers asked for again.
struct InOrder: Codable {
    init() {}

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        var nested = container.nestedContainer(keyedBy: AnyKey.self, forKey: "nested")
        try nested.encode(1, forKey: "x")
        var list = nested.nestedUnkeyedContainer(forKey: "list")
        try list.encode(1)
        var inner = list.nestedUnkeyedContainer()
        try inner.encode("2")
        try inner.encodeNil()
        var object = list.nestedContainer(keyedBy: AnyKey.self)
        try object.encodeNil(forKey: "k")
        try "from a super encoder".encode(to: list.superEncoder())
        try list.encode(true)
        try nested.encode(2, forKey: "y")
        var array = container.nestedUnkeyedContainer(forKey: "array")
        try array.encode(contentsOf: [1.5, 2.5])
        try 42.encode(to: container.superEncoder())
        var again = encoder.container(keyedBy: AnyKey.self)
        try again.encode("asked for twice", forKey: "again")
        var named = container.superEncoder(forKey: "named").container(keyedBy: AnyKey.self)
        try named.encode([1: 2], forKey: "dictionary")
    }

    init(from decoder: any Decoder) throws {}
}

/// Writes to a container after a later one was started, and uses a super encoder after more members.
struct OutOfOrder: Encodable {
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        var first = container.nestedContainer(keyedBy: AnyKey.self, forKey: "first")
        try first.encode(1, forKey: "one")
        var second = container.nestedUnkeyedContainer(forKey: "second")
        try second.encode("two")
        try first.encode(3, forKey: "three")
        let parent = container.superEncoder()
        try container.encode(true, forKey: "after")
        var single = parent.singleValueContainer()
        try single.encode(5)
    }
}

/// A member that cannot be encoded, caught and left out.
struct Forgiving: Encodable {
    struct Failing: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: AnyKey.self)
            try container.encode("written, then taken back", forKey: "partial")
            var list = container.nestedUnkeyedContainer(forKey: "list")
            try list.encode(1)
            throw CocoaError(.coderInvalidValue)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: AnyKey.self)
        try container.encode(1, forKey: "a")
        try? container.encode(Double.nan, forKey: "nan")
        try? container.encode([1.0, .infinity], forKey: "list")
        try? container.encode(Failing(), forKey: "failing")
        try container.encode(2, forKey: "b")
    }
}

/// Asks for a keyed and then an unkeyed container for the same value.
struct Confused: Encodable {
    func encode(to encoder: any Encoder) throws {
        _ = encoder.container(keyedBy: AnyKey.self)
        var list = encoder.unkeyedContainer()
        try list.encode(1)
    }
}

/// A class hierarchy: the subclass writes its superclass under `super`, and both share one container too.
class Base: Codable {
    var base = 1
    var shared = "shared"
    init() {}
    private enum CodingKeys: String, CodingKey { case base, shared }
}

final class Derived: Base {
    var derived = 2
    private enum CodingKeys: String, CodingKey { case derived }

    override init() { super.init() }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        derived = try container.decode(Int.self, forKey: .derived)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(derived, forKey: .derived)
        try super.encode(to: container.superEncoder())
        try super.encode(to: encoder)
    }
}

/// Reads a JSON object through every kind of container call and writes down what it was told.
struct Probe: Decodable {
    var log: [String] = []

    init(from decoder: any Decoder) throws {
        func outcome<T>(_ body: () throws -> T) -> String {
            do { return "\(try body())" } catch let error as DecodingError {
                switch error {
                case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context), .dataCorrupted(let context):
                    return "error at \(context.codingPath.map(\.stringValue))"
                @unknown default: return "error"
                }
            } catch { return "error \(error)" }
        }
        let object = try decoder.container(keyedBy: AnyKey.self)
        log.append("allKeys \(object.allKeys.map(\.stringValue).sorted()) path \(object.codingPath.map(\.stringValue))")
        for name: AnyKey in ["a", "b", "null", "missing", "list", "nested"] {
            log.append("\(name.stringValue): contains \(object.contains(name)), nil \(outcome { try object.decodeNil(forKey: name) }), "
                       + "Int? \(outcome { try object.decodeIfPresent(Int.self, forKey: name) }), String? \(outcome { try object.decodeIfPresent(String.self, forKey: name) }), "
                       + "Int \(outcome { try object.decode(Int.self, forKey: name) }), Double \(outcome { try object.decode(Double.self, forKey: name) })")
        }
        var list = try object.nestedUnkeyedContainer(forKey: "list")
        log.append("count \(String(describing: list.count)) at end \(list.isAtEnd) path \(list.codingPath.map(\.stringValue))")
        while !list.isAtEnd {
            let index = list.currentIndex
            log.append("[\(index)] Int \(outcome { try list.decode(Int.self) }) at \(list.currentIndex)")
            if list.currentIndex == index { log.append("[\(index)] nil \(outcome { try list.decodeNil() }) at \(list.currentIndex)") }
            if list.currentIndex == index { log.append("[\(index)] String \(outcome { try list.decode(String.self) }) at \(list.currentIndex)") }
            if list.currentIndex == index { log.append("[\(index)] Bool? \(outcome { try list.decodeIfPresent(Bool.self) }) at \(list.currentIndex)") }
            if list.currentIndex == index { log.append("[\(index)] super \(outcome { try list.superDecoder().codingPath.map(\.stringValue) }) at \(list.currentIndex)") }
        }
        log.append("past the end \(outcome { try list.decode(Int.self) })")
        let nested = try object.nestedContainer(keyedBy: AnyKey.self, forKey: "nested")
        log.append("nested \(nested.allKeys.map(\.stringValue).sorted()) n \(outcome { try nested.decode(Int8.self, forKey: "n") }) UInt \(outcome { try nested.decode(UInt.self, forKey: "n") })")
        let superDecoder = try nested.superDecoder()
        log.append("super path \(superDecoder.codingPath.map(\.stringValue)) keys \(outcome { try superDecoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue) })")
        let missing = try nested.superDecoder(forKey: "missing")
        log.append("missing super path \(missing.codingPath.map(\.stringValue)) nil \(outcome { try missing.singleValueContainer().decodeNil() }) keyed \(outcome { try missing.container(keyedBy: AnyKey.self).allKeys.count })")
        log.append("top super \(outcome { try object.superDecoder().singleValueContainer().decode(Int.self) })")
        log.append("not a list \(outcome { try object.nestedUnkeyedContainer(forKey: "nested").count })")
        log.append("not an object \(outcome { try object.nestedContainer(keyedBy: AnyKey.self, forKey: "list").allKeys.count })")
        log.append("missing nested \(outcome { try object.nestedContainer(keyedBy: AnyKey.self, forKey: "missing").allKeys.count })")
    }
}
