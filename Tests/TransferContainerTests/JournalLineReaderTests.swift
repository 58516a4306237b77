import Foundation
import Testing
@testable import TransferContainer
import TransferCoding

/// The journal's hand-written line decoder (`JournalLineReader`) against the synthesized
/// `Codable` decoding it replaces at start-up: thousands of varied lines (every member
/// missing, null, of each wrong type, numbers at their bounds, escapes, unicode, members in
/// any order, old sorted-key lines) decode to the same value both ways, or fail both ways.
@Suite("Journal lines decoded by hand")
struct JournalLineReaderTests {
    /// A task line's members as the daemon writes them, in declaration order, each as JSON
    /// text; the rare ones present too, so that every member is varied.
    static let taskMembers: [(String, String)] = [
        ("version", "1"), ("revision", "7"), ("taskIdentifier", "42"), ("kind", #""download""#),
        ("originalRequest", #"{"url":"http://127.0.0.1:9/a.bin","httpMethod":"GET","headers":[{"name":"User-Agent","value":"bench é"},{"name":"X-A","value":"1"}],"timeoutInterval":60}"#),
        ("currentURL", #""http://127.0.0.1:9/b.bin""#), ("taskDescription", #""a \"quoted\" \\ line\n\u00e9\ud83d\ude00 😀 \/""#),
        ("priority", "0.9"), ("earliestBeginDate", #""2026-11-26T03:26:58.705Z""#), ("state", "1"),
        ("countOfBytesReceived", "100"), ("countOfBytesExpectedToReceive", "-1"), ("countOfBytesSent", "0"),
        ("countOfBytesExpectedToSend", "-1"), ("countOfBytesClientExpectsToReceive", "5000000000"), ("countOfBytesClientExpectsToSend", "-1"),
        ("validator", #"{"entityTag":"\"x\"","lastModified":"Wed, 25 Nov 2026 03:26:54 GMT"}"#),
        ("response", #"{"url":"http://127.0.0.1:9/b.bin","statusCode":206,"headers":{"Accept-Ranges":"bytes","ETag":"\"x\""}}"#),
        ("uploadFile", #""AppGroups/g/file""#), ("requestBodyLength", "12"), ("requestBodyReplaced", "true"),
        ("uploadResumption", #"{"location":"http://127.0.0.1:9/up/1","interopVersion":6}"#),
        ("createdAt", #""2026-11-25T03:26:58.370Z""#), ("createdInBackground", "true"),
        ("requirements", #"{"allowsCellularAccess":false,"allowsExpensiveNetworkAccess":true,"allowsConstrainedNetworkAccess":true,"isDiscretionary":true}"#),
        ("rateLimitedUntil", #""2026-11-25T03:27:00.000Z""#), ("reportedWaitingForConnectivity", "false"), ("delayedRequestAnswered", "true"),
        ("replacementRequest", #"{"url":"http://127.0.0.1:9/c","httpMethod":"POST","headers":[]}"#),
        ("pendingChallenge", #"{"protectionSpace":{"host":"127.0.0.1","port":9,"protocol":"http","realm":"r","method":"Basic","isProxy":false},"previousFailureCount":1,"proposedUser":"u"}"#),
        ("authenticationFailures", "2"),
        ("pendingFailure", #"{"code":-1002,"message":"unsupported URL","subject":"ftp://x"}"#),
        ("retryCount", "3"), ("lastError", #""refused""#),
        ("retryCause", #"{"networkTrouble":{"code":-1004,"message":"refused"}}"#),
        ("retryNotBefore", #""2026-11-25T03:26:58.622Z""#), ("reportsResumeOffset", "false"), ("daemonCrashes", "1"),
        ("trustDisagreements", "0"), ("networkProtocolName", #""h2""#), ("redirectCount", "2"),
    ]

    /// Values put in place of a member's own: every JSON kind, numbers at and past the
    /// bounds of the record's integer and floating-point types, dates valid and not.
    static let replacements = [
        "null", "true", "false", "0", "-0", "1", "-1", "4", "1.0", "1.5", "-0.0", "1e2", "1E-2", "0e5",
        "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
        "-9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
        "3.4028234e38", "3.5e38", "1e-46", "1e400", "-1e400", "123456789012345678901234567890",
        #""""#, #""x""#, #""download""#, #""upload""#, #""Download""#, #""\u0064ownload""#,
        #""2026-11-25T03:26:58.622Z""#, #""2026-02-30T00:00:00.000Z""#, #""1969-12-31T23:59:59.999Z""#, #""2026-11-25T03:26:58Z""#,
        "{}", "[]", #"[{"name":"a","value":"b"}]"#, #"[{"name":"a"}]"#, #"[null]"#, #"{"url":"u","httpMethod":"GET","headers":[]}"#,
    ]

    static func taskLine(_ members: [(String, String)]) -> String {
        #"{"task":{"# + members.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",") + "}}"
    }

    /// Every variation of the task line, and lines of the other kinds.
    static var lines: [String] {
        let members = taskMembers
        var lines = [taskLine(members), taskLine(members.sorted { $0.0 < $1.0 }), taskLine(members.reversed())]
        for index in members.indices {
            var without = members
            without.remove(at: index)
            lines.append(taskLine(without))
            for replacement in replacements {
                var changed = members
                changed[index].1 = replacement
                lines.append(taskLine(changed))
            }
            // A name spelled with an escape is the same name.
            var escaped = members
            escaped[index].0 = "\\u00" + String(members[index].0.utf8.first!, radix: 16) + members[index].0.dropFirst()
            lines.append(taskLine(escaped))
        }
        // The nested objects decoded by hand, member by member.
        let nested: [(String, [(String, String)])] = [
            ("originalRequest", [("url", #""http://h/p""#), ("httpMethod", #""PUT""#), ("headers", #"[{"name":"A","value":"\u00e9"}]"#), ("timeoutInterval", "60.5")]),
            ("requirements", [("allowsCellularAccess", "true"), ("allowsExpensiveNetworkAccess", "false"), ("allowsConstrainedNetworkAccess", "false"), ("isDiscretionary", "false")]),
            ("replacementRequest", [("url", #""http://h/q""#), ("httpMethod", #""GET""#), ("headers", "[]")]),
        ]
        for (name, inner) in nested {
            let position = members.firstIndex { $0.0 == name }!
            func object(_ inner: [(String, String)]) -> String { "{" + inner.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",") + "}" }
            for index in inner.indices {
                var without = inner
                without.remove(at: index)
                var changed = members
                changed[position].1 = object(without)
                lines.append(taskLine(changed))
                for replacement in replacements {
                    var replaced = inner
                    replaced[index].1 = replacement
                    changed[position].1 = object(replaced)
                    lines.append(taskLine(changed))
                }
            }
            var unknown = members
            unknown[position].1 = object(inner + [("unknown", #"{"a":[1,2]}"#)])
            lines.append(taskLine(unknown))
        }
        for header in [#"{"name":"A"}"#, #"{"value":"b"}"#, #"{"name":1,"value":"b"}"#, #"{"name":"A","value":null}"#, "null", "[]", #""x""#, #"{"name":"A","value":"b","extra":true}"#] {
            var changed = members
            changed[4].1 = #"{"url":"u","httpMethod":"GET","headers":[{"name":"ok","value":"ok"},\#(header)]}"#
            lines.append(taskLine(changed))
        }
        lines.append(taskLine(members + [("unknownMember", #"[{"nested":null}]"#), ("future", "1e400")]))
        lines.append(taskLine(members.filter { !["revision", "currentURL", "validator", "response", "pendingChallenge", "pendingFailure", "retryCause"].contains($0.0) }))
        lines += TaskRecordStorageTests.oldJournal.split(separator: "\n").map(String.init)
        lines += [
            "{}", "[]", "null", "1", #""task""#, #"{"task":null}"#, #"{"task":[]}"#, #"{"task":{}}"#, #"{"acknowledgedThrough":7}"#,
            #"{"acknowledgedThrough":18446744073709551615}"#, #"{"acknowledgedThrough":18446744073709551616}"#, #"{"acknowledgedThrough":-1}"#,
            #"{"acknowledgedThrough":1.5}"#, #"{"acknowledgedThrough":null,"counters":null}"#, #"{"counters":{"nextTaskIdentifier":3,"nextEventNumber":4}}"#,
            #"{"counters":{"nextTaskIdentifier":3}}"#, #"{"counters":{"nextTaskIdentifier":"3","nextEventNumber":4}}"#, #"{"other":1}"#,
            #"{"event":{"version":1}}"#, #"{"event":null,"acknowledgedThrough":2}"#, "{\"task\":1,\"task\":2}", "{\"task\":", "",
        ]
        return lines
    }

    /// A task record with every field set, and one with none of the optional ones, as the
    /// compact encoder and Foundation's (sorted keys, pretty or not) write them.
    static var encodedLines: [String] {
        var full = TaskRecord(taskIdentifier: 9, kind: .upload, originalRequest: RequestRecord(url: "http://h/ü?q=\"1\"", httpMethod: "PUT", headers: [HeaderField(name: "A", value: "\u{1}\t")], timeoutInterval: 0.25))
        full.revision = 3
        full.currentURL = "http://h/2"
        full.taskDescription = "😀 \\ \u{7f}"
        full.priority = 0.1
        full.earliestBeginDate = Date(timeIntervalSince1970: 1_800_000_000.123)
        full.state = .canceling
        full.countOfBytesSent = Int64.max / 4
        full.validator = Validator(entityTag: "\"e\"", lastModified: nil)
        full.response = ResponseRecord(url: "http://h/2", statusCode: 200, headers: ["A": "b"])
        full.uploadFile = "AppGroups/x"
        full.requestBodyLength = 0
        full.requestBodyReplaced = false
        full.uploadResumption = UploadResumption(location: "http://h/r", interopVersion: 3)
        full.rateLimitedUntil = Date(timeIntervalSince1970: 0)
        full.replacementRequest = RequestRecord(url: "http://h/3")
        full.pendingFailure = TransferFailure(code: -999, message: "cancelled", subject: "s", backgroundTaskCancelledReason: 0, resumeData: Data([1, 2, 3]))
        full.retryCause = .serverAskedToWait(status: 503, seconds: 2.5)
        full.retryNotBefore = Date(timeIntervalSince1970: 1_900_000_000)
        full.daemonCrashes = 1
        full.trustDisagreements = 2
        full.networkProtocolName = "http/1.1"
        full.redirectCount = 0
        let bare = TaskRecord(taskIdentifier: Int(Int32.max), kind: .download, originalRequest: RequestRecord(url: ""), createdAt: Date(timeIntervalSince1970: 1_764_000_000))
        var lines: [String] = []
        for line in [JournalLine.task(full), .task(bare), .counters(JournalCounters(nextTaskIdentifier: 1, nextEventNumber: 1)), .acknowledged(through: 5),
                     .event(EventRecord(number: 1, kind: .taskCompleted, task: full, downloadedFile: "f"))] {
            lines.append(String(decoding: try! RecordCoding.encodeCompact(line), as: UTF8.self))
            lines.append(String(decoding: try! RecordCoding.encoder(pretty: false).encode(line), as: UTF8.self))
            lines.append(String(decoding: try! RecordCoding.encoder(pretty: true).encode(line), as: UTF8.self))
        }
        return lines
    }

    @Test("the line all variations start from is a good one")
    func baseLineIsGood() throws {
        let line = try RecordCoding.decode(JournalLine.self, from: Data(Self.taskLine(Self.taskMembers).utf8))
        #expect(line.task?.pendingChallenge?.proposedUser == "u")
        #expect(line.task?.taskDescription == "a \"quoted\" \\ line\n\u{e9}\u{1F600} \u{1F600} /")
    }

    @Test("every line decodes by hand as Codable decodes it: the same value, or an error both ways")
    func sameAsCodable() throws {
        let lines = Self.lines + Self.encodedLines
        var succeeded = 0
        for line in lines {
            let data = Data(line.utf8)
            let byCodable = Result { try RecordCoding.decode(JournalLine.self, from: data) }
            let byHand = Result { try JournalLineReader.read(data) }
            switch (byCodable, byHand) {
            case (.success(let expected), .success(let decoded)):
                succeeded += 1
                #expect(decoded == expected, "\(line)")
            case (.failure, .failure): break
            case (.success, .failure(let error)): Issue.record("refused by hand (\(error)), read by Codable: \(line)")
            case (.failure(let error), .success): Issue.record("read by hand, refused by Codable (\(error)): \(line)")
            }
            // What the journal reads through: a refused line is Codable's error, word for word.
            let read = Result { try JournalLineReader.line(from: data) }
            switch (byCodable, read) {
            case (.success(let expected), .success(let decoded)): #expect(decoded == expected)
            case (.failure(let expected), .failure(let error)): #expect("\(error)" == "\(expected)")
            default: Issue.record("the journal's reader and Codable disagree: \(line)")
            }
        }
        #expect(lines.count > 2000)
        #expect(succeeded > 400, "the variations include many good lines, not only refused ones")
    }

    @Test("a decoded task line takes a pointer's room in the parts the replay walks, not a whole JournalLine's")
    func decodedLineIsSmall() {
        #expect(MemoryLayout<JournalContents.DecodedLine>.size <= 17, "JournalLine alone takes \(MemoryLayout<JournalLine>.size) bytes")
    }

    @Test("a journal reads the same through the hand-written decoder, unreadable lines reported with Codable's words")
    func journalContents() throws {
        let text = (Self.lines + Self.encodedLines).filter { !$0.contains("\n") && !$0.isEmpty }.joined(separator: "\n") + "\n"
        let contents = JournalContents(parsing: Data(text.utf8))
        var expected = JournalContents()
        var unreadable: [(Int, String)] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            do { try expected.apply(try RecordCoding.decode(JournalLine.self, from: Data(line.utf8))) } catch { unreadable.append((index + 1, "\(error)")) }
        }
        #expect(contents.tasks == expected.tasks)
        #expect(contents.events == expected.events)
        #expect(contents.counters == expected.counters)
        #expect(contents.unreadable.count == unreadable.count)
        // The first difference only: a list of two thousand lines says nothing more.
        if let (read, expected) = zip(contents.unreadable, unreadable).first(where: { $0.0.line != $0.1.0 || $0.0.reason != $0.1.1 }) {
            Issue.record("line \(read.line) reported as \(read.reason); expected line \(expected.0): \(expected.1)")
        }
    }
}
