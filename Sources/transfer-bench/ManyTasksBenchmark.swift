import BackgroundTransfer
import TransferContainer
import LoopbackServer
import TransferCoding
import TransferLogging
import TransferPOSIX

/// Many queued tasks in one session: how fast they are created (from the first
/// `downloadTask(with:)` until the daemon has made the last one durable), how long `getAllTasks` takes with all of them, and the
/// daemon's resident memory holding them. Each run has its own container and daemon; the
/// tasks are never resumed, so they stay queued.
///
/// References, measured in the same runs: the rate at which task records can be made
/// durable one at a time (a journal line and an fdatasync each) on the same file system,
/// which would bound creation without group commit; the time to encode and decode the
/// `getAllTasks` reply (a summary of each task) in one process; the daemon's memory with
/// the session open and no task.
struct ManyTasksBenchmark {
    let counts: [Int]
    let runs: Int
    let entitlements: String
    /// The count whose figures are the headline ones (the others go to the scaling table).
    let headline: Int

    /// getAllTasks calls per run.
    static let listingsPerRun = 5

    struct Run {
        var creationRate: Double
        var durableWriteRate: Double
        var listings: [Double]
        var encodingMilliseconds: Double
        var decodingMilliseconds: Double
        var replyBytes: Int
        /// Encoding and decoding of every task's full record (`getTasks` for all of them).
        var fullRecordsMilliseconds: Double
        var residentMiB: Double
        var emptyResidentMiB: Double
        var residentAfterListingsMiB: Double
        /// Why getAllTasks calls failed in the daemon (the library then answers from its own
        /// task objects, after its request timeout).
        var listingFailures: [String]
    }

    func run(into report: Report) throws {
        for count in counts {
            print("many tasks: \(count) download tasks created in one session and left queued, \(runs) runs")
            var results: [Run] = []
            for number in 1...runs {
                let run = try once(count: count, referenceFirst: number % 2 == 1)
                results.append(run)
                let listings = run.listings.map { String(format: "%.1f", $0) }.joined(separator: ", ")
                print(String(format: "  run %d: created %.0f tasks/s (one fdatasync per task: %.0f/s); getAllTasks ", number, run.creationRate, run.durableWriteRate) + listings
                      + String(format: " ms (reply coding alone %.2f ms, %.2f MiB); daemon RSS %.1f MiB (%.1f MiB with no task, %.1f MiB after the listings)",
                               run.encodingMilliseconds + run.decodingMilliseconds, Double(run.replyBytes) / 1048576, run.residentMiB, run.emptyResidentMiB, run.residentAfterListingsMiB))
            }
            let creation = Measure("tasks created", unit: "tasks/s", results.map(\.creationRate))
            let listing = Measure("getAllTasks", unit: "ms", results.flatMap(\.listings))
            let failures = results.flatMap(\.listingFailures)
            let memory = Measure("VmRSS", unit: "MiB", results.map(\.residentMiB))
            report.scale(count) { point in
                point.creationRate = creation.summary
                point.getAllTasksMilliseconds = listing.summary
                point.daemonResidentMiB = memory.summary
            }
            guard count == headline else { continue }
            report.add(Figure(id: "tasks.creation", title: "\(count) download tasks created in one session (durable), tasks per second",
                              result: creation,
                              reference: Measure("task records made durable one at a time (a journal line and an fdatasync each) on the same disk", unit: "/s", results.map(\.durableWriteRate)),
                              target: .atLeast(20_000),
                              notes: ["One thread calls `downloadTask(with:)` \(count) times, then `waitUntilDurable()`; the clock stops when the daemon has answered the last creation, which it does only once the task is on disk. The daemon commits the tasks that arrived while its previous commit was under way together, with one fdatasync."]))
            report.add(Figure(id: "tasks.getAllTasks", title: "getAllTasks with \(count) tasks",
                              result: listing,
                              reference: Measure("encoding and decoding of the reply in one process", unit: "ms", results.map { $0.encodingMilliseconds + $0.decodingMilliseconds }),
                              target: .atMost(100),
                              details: [Measure("reply size", unit: "MiB", results.map { Double($0.replyBytes) / 1048576 }),
                                        Measure("encoding of the reply alone", unit: "ms", results.map(\.encodingMilliseconds)),
                                        Measure("decoding of the reply alone", unit: "ms", results.map(\.decodingMilliseconds)),
                                        Measure("encoding and decoding of every task's full record (what getTasks would cost for all)", unit: "ms", results.map(\.fullRecordsMilliseconds))],
                              notes: ["From the call to the completion handler, \(Self.listingsPerRun) calls per run. The daemon answers with a summary of each task (identifier, revision, state, byte counts); the library asks for full records only of tasks it holds no current snapshot of (none here)."]
                                + (failures.isEmpty ? [] : ["\(failures.count) of \(listing.values.count) calls got no answer from the daemon; the library logged `\(failures[0])` and answered from its own task objects."])))
            report.add(Figure(id: "tasks.memory", title: "transferd resident memory with \(count) queued tasks (VmRSS)",
                              result: memory,
                              reference: Measure("with the session open and no task", unit: "MiB", results.map(\.emptyResidentMiB)),
                              target: .atMost(count >= 1_000_000 ? 1024 : 128), // issue 32
                              details: [Measure("after the getAllTasks calls", unit: "MiB", results.map(\.residentAfterListingsMiB))],
                              notes: ["Read from /proc/PID/status right after the last task was created."]))
        }
    }

    private func once(count: Int, referenceFirst: Bool) throws -> Run {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        // Past the daemon's default cap on one app's unfinished tasks (200,000), the cap is raised.
        let daemon = try container.startDaemon(options: count > TransferLimits.tasksPerApp ? ["--max-tasks-per-app", String(count)] : [])
        let app = try BenchApp(entitlements: entitlements, container: container)
        let empty = try ResidentMemory(pid: daemon).current
        let urls = (0..<count).map { server.url(for: "/queued/\($0).bin") }

        let reference = container.parent.appendingPathComponent("reference")
        var durableRate = referenceFirst ? try durableWriteRate(count: count, url: urls[0].absoluteString, in: reference) : 0
        let start = monotonicNow()
        for url in urls {
            _ = app.session.downloadTask(with: url)
        }
        // At least 2,000 tasks a second: a loaded machine makes 1,000,000 tasks take minutes.
        let deadline = max(120, Double(count) / 2_000)
        guard app.session.waitUntilDurable(timeout: deadline) else { throw BenchError("the daemon did not take \(count) tasks within \(Int(deadline)) s") }
        let creationRate = Double(count) / (monotonicNow() - start)
        let resident = try ResidentMemory(pid: daemon).current
        if !referenceFirst { durableRate = try durableWriteRate(count: count, url: urls[0].absoluteString, in: reference) }

        var listings: [Double] = []
        var failures: [String] = []
        for _ in 0..<Self.listingsPerRun {
            let (tasks, milliseconds) = try app.allTasks()
            guard tasks.count == count else { throw BenchError("getAllTasks returned \(tasks.count) tasks, not \(count)") }
            listings.append(milliseconds)
            failures = TransferLog.entries(layout: container.layout).filter { $0.process == "transfer-bench" && $0.message.hasPrefix("getAllTasks failed") }.map(\.message)
            // The daemon did not answer; the next calls would only wait out the same timeout.
            if !failures.isEmpty { break }
        }
        let coding = try replyCoding(.taskSummaries(TaskSummaries((1...count).map { TaskSummary(of: record($0, url: urls[0].absoluteString)) }, form: .compact)))
        let fullRecords = try replyCoding(.tasks((1...count).map { record($0, url: urls[0].absoluteString) }))
        return Run(creationRate: creationRate, durableWriteRate: durableRate, listings: listings, encodingMilliseconds: coding.encoding,
                   decodingMilliseconds: coding.decoding, replyBytes: coding.bytes, fullRecordsMilliseconds: fullRecords.encoding + fullRecords.decoding, residentMiB: resident, emptyResidentMiB: empty, residentAfterListingsMiB: try ResidentMemory(pid: daemon).current, listingFailures: failures)
    }

    /// A queued download task's record, as the daemon keeps it.
    private func record(_ identifier: Int, url: String) -> TaskRecord {
        TaskRecord(taskIdentifier: identifier, kind: .download, originalRequest: RequestRecord(url: url.replacingOccurrences(of: "/0.bin", with: "/\(identifier).bin")))
    }

    /// Task records per second made durable one at a time (one journal line, one fdatasync
    /// each) in a fresh journal: what creation would cost without group commit. At most
    /// 10,000 records: the rate does not change with more, only the wait.
    private func durableWriteRate(count: Int, url: String, in directory: URL) throws -> Double {
        let count = min(count, 10_000)
        try DurableFile.makeDirectory(directory.path)
        let journal = try SessionJournal(path: directory.appendingPathComponent("journal.jsonl").path, contents: JournalContents())
        let records = (1...count).map { record($0, url: url) }
        let start = monotonicNow()
        for record in records {
            try journal.append(.task(record))
            try journal.commit()
        }
        return Double(count) / (monotonicNow() - start)
    }

    /// Milliseconds to encode and to decode a reply frame, and its size.
    private func replyCoding(_ reply: DaemonReply) throws -> (encoding: Double, decoding: Double, bytes: Int) {
        let frame = DaemonFrame.reply(id: 1, reply)
        let start = monotonicNow()
        let body = try RecordCoding.encoder(pretty: false).encode(frame)
        let encoded = monotonicNow()
        _ = try RecordCoding.decoder().decode(DaemonFrame.self, from: body)
        return ((encoded - start) * 1000, (monotonicNow() - encoded) * 1000, body.count)
    }
}
