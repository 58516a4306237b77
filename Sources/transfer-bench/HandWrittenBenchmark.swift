import Foundation
import TransferContainer
import TransferCoding

/// `transfer-bench hand-written`: each piece the project wrote by hand where Foundation or the
/// system has one, timed against that one in the same run: the compact JSON coder against
/// `JSONEncoder`/`JSONDecoder` on the real records and frames (and on the coding one task
/// creation costs the daemon), ISO 8601 by hand against `Date.ISO8601FormatStyle` and
/// `ISO8601DateFormatter` (SHA-256 in C was measured here against libcrypto's, which
/// replaced it: see Benchmarks/README.md). Every run times each pair once,
/// alternating which goes first; a piece's figure is the median ratio (hand-written ÷ system)
/// and its spread over the runs. In-process; printed, not part of the report or of `all`.
/// Runs on the main thread.
struct HandWrittenBenchmark {
    let runs: Int
    let quick: Bool

    /// One pair: the hand-written piece and the system's, each doing the same work `iterations` times.
    struct Pair {
        var name: String
        var iterations: Int
        var handWritten: () throws -> Void
        var system: () throws -> Void
    }

    func run() throws {
        let records = try SampleRecords()
        let pairs = try jsonPairs(records) + iso8601Pairs()
        print("hand-written ÷ system: µs per operation (medians) and the ratio's median [smallest–largest] over \(runs) alternating runs, after one warm-up run")
        print("journal line \(records.journalLine.count) bytes, createTask request \(records.request.count) bytes, event frame \(records.eventFrame.count) bytes, session record \(records.session.count) bytes")
        print("piece".padding(toLength: 46, withPad: " ", startingAt: 0) + "   hand-written       system   ratio")
        for pair in pairs { try compare(pair) }
        try creationCoding(records)
    }

    /// Times the pair `runs` times after a warm-up, alternating which side goes first; prints a line.
    private func compare(_ pair: Pair) throws {
        func microseconds(_ body: () throws -> Void) throws -> Double {
            let start = monotonicNow()
            for _ in 0..<pair.iterations { try body() }
            return (monotonicNow() - start) * 1e6 / Double(pair.iterations)
        }
        var handWritten: [Double] = []
        var system: [Double] = []
        for run in 0...runs {
            let (ours, theirs): (Double, Double)
            if run % 2 == 0 {
                ours = try microseconds(pair.handWritten)
                theirs = try microseconds(pair.system)
            } else {
                theirs = try microseconds(pair.system)
                ours = try microseconds(pair.handWritten)
            }
            guard run > 0 else { continue } // the warm-up
            handWritten.append(ours)
            system.append(theirs)
        }
        let ratios = zip(handWritten, system).map { $0 / $1 }.sorted()
        print(pair.name.padding(toLength: 46, withPad: " ", startingAt: 0)
              + String(format: " %14.3f %12.3f   %.3f [%.3f–%.3f]", median(handWritten), median(system), median(ratios), ratios.first ?? 0, ratios.last ?? 0))
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    // MARK: JSON

    private func jsonPairs(_ records: SampleRecords) throws -> [Pair] {
        jsonPairs("journal line (TaskRecord)", records.line, records.journalLine)
            + jsonPairs("createTask request", records.requestFrame, records.request)
            + jsonPairs("event frame (push)", records.frame, records.eventFrame)
            + jsonPairs("session record", records.sessionRecord, records.session)
    }

    /// Encoding `value` and decoding `encoded` (the compact coder's JSON of it), by each coder.
    private func jsonPairs<Value: Codable>(_ name: String, _ value: Value, _ encoded: Data) -> [Pair] {
        let encoder = SampleRecords.foundationEncoder()
        let decoder = RecordCoding.decoder()
        let compact = CompactJSONEncoder()
        let iterations = quick ? 200 : 2_000
        return [
            Pair(name: "JSON encode: \(name)", iterations: iterations,
                 handWritten: { _ = try compact.encode(value) }, system: { _ = try encoder.encode(value) }),
            Pair(name: "JSON decode: \(name)", iterations: iterations,
                 handWritten: { _ = try RecordCoding.decode(Value.self, from: encoded) }, system: { _ = try decoder.decode(Value.self, from: encoded) }),
        ]
    }

    /// The coding one task creation costs, by each coder: the daemon decodes the request,
    /// journals the task and encodes its reply; the client encodes the request and decodes the
    /// reply. The daemon's share bounds the creation rate of one session (its requests are
    /// handled one after another), which issue 22 wants at 20,000 tasks/s or more.
    private func creationCoding(_ records: SampleRecords) throws {
        let encoder = SampleRecords.foundationEncoder()
        let decoder = RecordCoding.decoder()
        let compact = CompactJSONEncoder()
        let reply = DaemonFrame.reply(id: 12, .task(records.createdTask))
        let replyBytes = try compact.encode(reply)
        let created = JournalLine.task(records.createdTask)
        let daemon = Pair(name: "task creation, daemon's coding", iterations: quick ? 200 : 2_000, handWritten: {
            _ = try RecordCoding.decode(RequestFrame.self, from: records.request)
            _ = try compact.encode(created)
            _ = try compact.encode(reply)
        }, system: {
            _ = try decoder.decode(RequestFrame.self, from: records.request)
            _ = try encoder.encode(created)
            _ = try encoder.encode(reply)
        })
        let client = Pair(name: "task creation, client's coding", iterations: quick ? 200 : 2_000, handWritten: {
            _ = try compact.encode(records.requestFrame)
            _ = try RecordCoding.decode(DaemonFrame.self, from: replyBytes)
        }, system: {
            _ = try encoder.encode(records.requestFrame)
            _ = try decoder.decode(DaemonFrame.self, from: replyBytes)
        })
        try compare(daemon)
        try compare(client)
    }

    // MARK: ISO 8601

    private func iso8601Pairs() throws -> [Pair] {
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC") ?? .gmt)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = Date(timeIntervalSince1970: 1_763_736_710.705)
        let text = ISO8601Format.string(from: date)
        let iterations = quick ? 2_000 : 20_000
        return [
            Pair(name: "ISO 8601 format ÷ Date.ISO8601FormatStyle", iterations: iterations,
                 handWritten: { _ = ISO8601Format.string(from: date) }, system: { _ = style.format(date) }),
            Pair(name: "ISO 8601 parse ÷ Date.ISO8601FormatStyle", iterations: iterations,
                 handWritten: { _ = ISO8601Format.date(from: text) }, system: { _ = try style.parse(text) }),
            Pair(name: "ISO 8601 format ÷ ISO8601DateFormatter", iterations: iterations,
                 handWritten: { _ = ISO8601Format.string(from: date) }, system: { _ = formatter.string(from: date) }),
            Pair(name: "ISO 8601 parse ÷ ISO8601DateFormatter", iterations: iterations,
                 handWritten: { _ = ISO8601Format.date(from: text) }, system: { _ = formatter.date(from: text) }),
        ]
    }
}
