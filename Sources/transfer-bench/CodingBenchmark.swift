import Foundation
import TransferContainer

/// `transfer-bench coding`: microseconds per encode and per decode of a journal line about a
/// download under way (`JournalLine.task`) and of the frame that pushes its completion
/// (`DaemonFrame.push(.event)`), by Foundation's coder as `RecordCoding` configures it and by
/// the compact coder, and how many times faster the compact one is. In-process, under ten
/// seconds; printed, not part of the report or of `all`. Stateless.
enum CodingBenchmark {
    static func run(slices: Int, iterations: Int) throws {
        let task = download()
        let line = JournalLine.task(task)
        let event = EventRecord(number: 42, kind: .taskCompleted, createdAt: Date(), task: task, downloadedFile: "/home/user/container/Sessions/com.example.host/com.example.host.background/downloads/7.download")
        let frame = DaemonFrame.push(.event(session: try SessionIdentifier("com.example.host.background"), event))
        let foundationEncoder = RecordCoding.encoder(pretty: false)
        let foundationDecoder = RecordCoding.decoder()
        let lineBytes = try RecordCoding.encodeCompact(line)
        let frameBytes = try RecordCoding.encodeCompact(frame)
        print("coding: µs per operation, median of \(slices) slices of \(iterations) calls; journal line \(lineBytes.count) bytes, event frame \(frameBytes.count) bytes")
        print("operation            Foundation   compact   faster")
        try compare("journal line encode", slices, iterations, { _ = try foundationEncoder.encode(line) }, { _ = try RecordCoding.encodeCompact(line) })
        try compare("journal line decode", slices, iterations, { _ = try foundationDecoder.decode(JournalLine.self, from: lineBytes) }, { _ = try RecordCoding.decode(JournalLine.self, from: lineBytes) })
        try compare("event frame encode", slices, iterations, { _ = try foundationEncoder.encode(frame) }, { _ = try RecordCoding.encodeCompact(frame) })
        try compare("event frame decode", slices, iterations, { _ = try foundationDecoder.decode(DaemonFrame.self, from: frameBytes) }, { _ = try RecordCoding.decode(DaemonFrame.self, from: frameBytes) })
    }

    /// A download as the daemon journals it once its response has arrived.
    private static func download() -> TaskRecord {
        var task = TaskRecord(taskIdentifier: 7, kind: .download, originalRequest: RequestRecord(
            url: "https://downloads.example.com/files/7/archive.tar.gz?token=abc123", headers: [HeaderField(name: "Accept", value: "*/*"), HeaderField(name: "User-Agent", value: "host-app/1.0")]))
        task.revision = 3
        task.currentURL = "https://cdn.example.net/files/7/archive.tar.gz"
        task.taskDescription = "nightly archive"
        task.state = .running
        task.countOfBytesReceived = 65_536
        task.countOfBytesExpectedToReceive = 1_048_576
        task.validator = Validator(entityTag: "\"5f3a-1000\"", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT")
        task.response = ResponseRecord(url: "https://cdn.example.net/files/7/archive.tar.gz", statusCode: 200, headers: [
            "Content-Type": "application/gzip", "Content-Length": "1048576", "ETag": "\"5f3a-1000\"", "Accept-Ranges": "bytes",
            "Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT", "Cache-Control": "max-age=3600"])
        task.requirements = TaskRequirements(isDiscretionary: true)
        return task
    }

    /// Times the two in alternating slices of `iterations` calls (so that the machine's
    /// changes of pace fall on both alike), the first slice of each a warm-up; prints the
    /// medians and their ratio.
    private static func compare(_ name: String, _ slices: Int, _ iterations: Int, _ foundation: () throws -> Void, _ compact: () throws -> Void) throws {
        func microseconds(_ body: () throws -> Void) throws -> Double {
            let start = monotonicNow()
            for _ in 0..<iterations { try body() }
            return (monotonicNow() - start) * 1e6 / Double(iterations)
        }
        var reference: [Double] = []
        var ours: [Double] = []
        for slice in 0...slices {
            let (one, other) = (try microseconds(foundation), try microseconds(compact))
            if slice > 0 {
                reference.append(one)
                ours.append(other)
            }
        }
        let (referenceMedian, oursMedian) = (reference.sorted()[slices / 2], ours.sorted()[slices / 2])
        print(name.padding(toLength: 20, withPad: " ", startingAt: 0) + String(format: " %10.2f %9.2f %7.1f×", referenceMedian, oursMedian, referenceMedian / oursMedian))
    }
}
