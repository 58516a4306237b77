import BackgroundTransfer
import TransferContainer
import LoopbackServer
import TransferLogging

/// From a task's end in the daemon to `didCompleteWithError` in an attached client: the
/// daemon's log line for the end of the task (`finished: …`, written when the transfer has
/// ended, before the turn's commit makes the file and the event durable and the event is
/// pushed) against CLOCK_REALTIME taken on
/// entry to the delegate call, in this process. One small download at a time, so that
/// no completion waits behind another.
///
/// The log's timestamps are rounded to the millisecond, so each sample is within ±0.5 ms.
/// Reference: a `ping` to the daemon on a new connection (connect, one request, one reply).
struct EventLatencyBenchmark {
    let samplesPerRun: Int
    let runs: Int
    let entitlements: String

    func run(into report: Report) throws {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        server.serve("/tiny.bin", data: Data(repeating: 0x2A, count: 1024))
        let url = server.url(for: "/tiny.bin")
        _ = try container.startDaemon()
        let app = try BenchApp(entitlements: entitlements, container: container)

        print("event latency: task finished in the daemon → didCompleteWithError here, \(runs) runs of \(samplesPerRun) downloads, one at a time")
        var completions: [Completion] = []
        var pings: [Double] = []
        var runMedians: [Double] = []
        for run in 1...runs {
            var thisRun: [Completion] = []
            for _ in 0..<samplesPerRun {
                let start = monotonicNow()
                _ = try DaemonEndpoint.request(.ping, layout: container.layout, timeout: 10)
                pings.append((monotonicNow() - start) * 1000)
                app.delegate.expect(1, movingTo: nil)
                app.session.downloadTask(with: url).resume()
                thisRun += try app.delegate.waitForExpected(timeout: 30)
            }
            let latencies = try latencies(of: thisRun, in: container)
            runMedians.append(Summary(latencies)!.median)
            completions += thisRun
            print(String(format: "  run %d: p50 %.2f ms, max %.2f ms", run, Summary(latencies)!.median, Summary(latencies)!.max))
        }
        let all = try latencies(of: completions, in: container)
        let ping = Measure("ping on a new connection", unit: "ms", pings)
        let note = "Each sample: the daemon's log time of `finished:` (rounded to 1 ms, so ±0.5 ms; written when the transfer has ended, so the commit that makes the file and its completion event durable (fsync of the file and its folder, one fdatasync of the journal) is counted) to CLOCK_REALTIME on entry to didCompleteWithError; in between the daemon commits and pushes the event, the library decodes it, records the delivery and calls didFinishDownloadingTo (the file is left to be removed)."
        report.add(Figure(id: "event.p50", title: "task finished → didCompleteWithError in an attached client, p50",
                          result: Measure("latency", unit: "ms", all), reference: ping, target: .atMost(2),
                          details: [Measure("p50 of each run", unit: "ms", runMedians)], notes: [note]))
        report.add(Figure(id: "event.p99", title: "task finished → didCompleteWithError in an attached client, p99",
                          result: Measure("latency", unit: "ms", all), reference: ping, target: .atMost(20, .p99)))
    }

    /// Milliseconds from each task's end in the daemon's log to its completion here.
    private func latencies(of completions: [Completion], in container: BenchContainer) throws -> [Double] {
        var finished: [Int: Double] = [:]
        for entry in TransferLog.entries(layout: container.layout)
        where entry.process == "transferd" && entry.session == BenchApp.sessionIdentifier && entry.message.hasPrefix("finished:") {
            if let task = entry.task { finished[task] = entry.time.timeIntervalSince1970 }
        }
        return try completions.map { completion in
            if let error = completion.error { throw BenchError("task \(completion.task) failed: \(error)") }
            guard let end = finished[completion.task] else { throw BenchError("no `finished` line in the daemon's log for task \(completion.task)") }
            return (completion.realtime - end) * 1000
        }
    }
}
