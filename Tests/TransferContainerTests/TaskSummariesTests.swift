import Foundation
import Testing
import TransferContainer
import TransferCoding

@Suite("TaskSummaries")
struct TaskSummariesTests {
    let summaries = TaskSummaries([
        TaskSummary(taskIdentifier: 1, revision: 0, state: .suspended),
        TaskSummary(taskIdentifier: 2, revision: 7, state: .running, countOfBytesReceived: 1 << 40, countOfBytesExpectedToReceive: (1 << 40) + 1),
        TaskSummary(taskIdentifier: 3, revision: Int.max, state: .canceling, countOfBytesSent: Int64.max, countOfBytesExpectedToSend: Int64.min),
        TaskSummary(taskIdentifier: Int.max, revision: 1, state: .completed, countOfBytesReceived: -1, countOfBytesExpectedToReceive: 0, countOfBytesSent: 12, countOfBytesExpectedToSend: 13),
    ])

    /// The JSON body of a `getAllTasks` reply frame carrying `summaries`.
    func replyBody(_ summaries: TaskSummaries) throws -> Data {
        try Frame.encode(DaemonFrame.reply(id: 9, .taskSummaries(summaries))).dropFirst(4)
    }

    func decodedSummaries(_ body: Data) throws -> TaskSummaries? {
        guard case .reply(9, .taskSummaries(let decoded)) = try Frame.decode(DaemonFrame.self, from: body) else { return nil }
        return decoded
    }

    @Test("summaries round-trip through a reply frame, every field and extreme value kept, in order")
    func roundTrip() throws {
        #expect(try decodedSummaries(try replyBody(summaries)) == summaries)
        #expect(try decodedSummaries(try replyBody(TaskSummaries([]))) == TaskSummaries([]))
    }

    @Test("10,000 summaries round-trip and take about 56 bytes each before base64")
    func many() throws {
        let many = TaskSummaries((1...10_000).map { TaskSummary(taskIdentifier: $0, revision: $0 % 5, state: .suspended, countOfBytesReceived: Int64($0)) })
        let body = try replyBody(many)
        #expect(body.count < 10_000 * 56 * 4 / 3 + 200)
        #expect(try decodedSummaries(body) == many)
    }

    @Test("a summary of a record takes its identifier, revision, state and counts")
    func ofRecord() {
        var record = TaskRecord(taskIdentifier: 12, kind: .upload, originalRequest: RequestRecord(url: "http://127.0.0.1:9/up", httpMethod: "PUT"))
        record.revision = 4
        record.state = .running
        record.countOfBytesSent = 100
        record.countOfBytesExpectedToSend = 200
        #expect(TaskSummary(of: record) == TaskSummary(taskIdentifier: 12, revision: 4, state: .running, countOfBytesReceived: 0, countOfBytesExpectedToReceive: -1, countOfBytesSent: 100, countOfBytesExpectedToSend: 200))
    }

    @Test("a payload that does not hold `count` summaries, or holds a state that is none, is a decoding error", arguments: [
        #"{"count":2,"packed":""}"#,
        #"{"count":1,"packed":"AAAA"}"#,
        #"{"count":-1,"packed":""}"#,
        #"{"count":1,"packed":"not base64!"}"#,
        #"{"count":"1","packed":""}"#,
        #"{"packed":""}"#,
        #"{"count":0}"#,
        #"{"count":9223372036854775807,"packed":"AAAAAAAAAAA="}"#,
    ])
    func corrupt(json: String) {
        #expect(throws: DecodingError.self) { try RecordCoding.decoder().decode(TaskSummaries.self, from: Data(json.utf8)) }
    }

    @Test("a short payload, a count that is off, or a bad state in a reply frame is .malformed, not a crash")
    func corruptFrames() throws {
        let good = try #require(String(data: try replyBody(summaries), encoding: .utf8))
        let packed = try #require(good.firstMatch(of: #/"packed":"([^"]*)"/#)?.output.1)
        let bytes = try #require(Data(base64Encoded: String(packed)))
        var badState = bytes
        badState[16] = 9 // the first summary's state
        let variants = [
            good.replacingOccurrences(of: #""count":4"#, with: #""count":5"#),
            good.replacingOccurrences(of: #""count":4"#, with: #""count":3"#),
            good.replacingOccurrences(of: String(packed), with: bytes.dropLast(8).base64EncodedString()),
            good.replacingOccurrences(of: String(packed), with: badState.base64EncodedString()),
        ]
        for variant in variants {
            #expect(variant != good)
            #expect(throws: FrameError.self) { try Frame.decode(DaemonFrame.self, from: Data(variant.utf8)) }
        }
        // Every truncation of the packed bytes.
        for length in 0..<bytes.count {
            let short = good.replacingOccurrences(of: String(packed), with: bytes.prefix(length).base64EncodedString())
            #expect(throws: FrameError.self) { try Frame.decode(DaemonFrame.self, from: Data(short.utf8)) }
        }
    }

    @Test("the compact form round-trips every field and extreme value, and takes 7 bytes for a queued task")
    func compactRoundTrip() throws {
        var compact = summaries
        compact.form = .compact
        #expect(try decodedSummaries(try replyBody(compact)) == compact)
        #expect(try decodedSummaries(try replyBody(TaskSummaries([], form: .compact))) == TaskSummaries([], form: .compact))
        let descending = TaskSummaries([TaskSummary(taskIdentifier: Int.max, revision: Int.min, state: .running), TaskSummary(taskIdentifier: Int.min, revision: 0, state: .suspended)], form: .compact)
        #expect(try decodedSummaries(try replyBody(descending)) == descending)
        let queued = TaskSummaries((1...10_000).map { TaskSummary(taskIdentifier: $0, revision: 1, state: .suspended) }, form: .compact)
        let body = try replyBody(queued)
        #expect(body.count < 10_000 * 7 * 4 / 3 + 200)
        #expect(try decodedSummaries(body) == queued)
    }

    @Test("a compact payload cut short, with a number past 64 bits, a bad state, bytes left over or a count it cannot hold is a decoding error", arguments: [
        ([2, 2, 2, 0, 1, 0, 1], 2),       // one summary's bytes for a count of 2
        ([2, 2, 2, 0, 1, 0], 1),          // cut short
        ([2, 2, 2, 0, 1, 0, 1, 0], 1),    // a byte left over
        ([2, 2, 18, 0, 1, 0, 1], 1),      // state 9
        ([255, 255, 255, 255, 255, 255, 255, 255, 255, 2, 2, 2, 0, 1, 0, 1], 1), // a tenth byte above 1
        ([255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 1, 2, 2, 0, 1, 0, 1], 1), // eleven bytes
        ([2, 2, 2, 0, 1, 0, 1], -1),
        ([2, 2, 2, 0, 1, 0, 1], Int.max),
    ] as [([UInt8], Int)])
    func corruptCompact(bytes: [UInt8], count: Int) {
        let json = #"{"count":\#(count),"compact":"\#(Data(bytes).base64EncodedString())"}"#
        #expect(throws: DecodingError.self) { try RecordCoding.decoder().decode(TaskSummaries.self, from: Data(json.utf8)) }
        #expect(throws: DecodingError.self) { try RecordCoding.decode(TaskSummaries.self, from: Data(json.utf8)) }
    }

    @Test("the bytes a summary needs at least decode: zigzag varints")
    func compactSmallest() throws {
        let json = #"{"count":1,"compact":"\#(Data([2, 2, 2, 0, 1, 0, 1]).base64EncodedString())"}"#
        let decoded = try RecordCoding.decode(TaskSummaries.self, from: Data(json.utf8))
        #expect(decoded == TaskSummaries([TaskSummary(taskIdentifier: 1, revision: 1, state: .suspended, countOfBytesReceived: 0, countOfBytesExpectedToReceive: -1,
                                                      countOfBytesSent: 0, countOfBytesExpectedToSend: -1)], form: .compact))
    }

    @Test("a hello from a client before compact summaries decodes, asking for none")
    func oldHello() throws {
        let hello = ClientHello(identity: AppIdentity(bundleIdentifier: try BundleIdentifier("com.example.a"), kind: .app, containingApp: try BundleIdentifier("com.example.a"), containingAppExecutable: "/bin/a", appGroups: []),
                                executablePath: "/bin/a", processName: "a", isForeground: true)
        let json = try RecordCoding.encodeCompact(hello)
        #expect(!String(decoding: json, as: UTF8.self).contains("readsCompactSummaries"))
        #expect(try RecordCoding.decode(ClientHello.self, from: json).readsCompactSummaries == nil)
    }
}
