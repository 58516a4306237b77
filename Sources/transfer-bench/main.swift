import Foundation

// What this executable is entitled to: it acts as an app of its own for the figures a client
// sees from the inside (its own bundle and app group, never the stand-ins'). The daemon reads
// this very text from the executable file of every process that connects (see `Entitlements`).
let entitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "com.example.bench", "kind": "app", "containingApp": "com.example.bench",
  "containingAppExecutable": "transfer-bench", "appGroups": ["group.com.example.bench"]}]
BGTRANSFER-ENTITLEMENTS-END
"""

// transfer-bench: figures measured on this machine, each against a reference in the same run,
// written to DIR/results.json and DIR/results.md (see Benchmarks/README.md).
let usage = """
usage: transfer-bench [FIGURE] [--quick] [--runs N] [--out DIR] [--size MiB] [--tasks N,N,…] [--samples N]
  FIGURE: all (the default), download, upload, refetch, many-tasks, small-files, event-latency, relaunch, startup, sessions, extension-start,
          https (nginx over TLS + HTTP/2 ÷ curl --cacert), cpu (transferd CPU per GiB ÷ curl's),
          foreground (default sessions ÷ FoundationNetworking's: upload from a file, 10,000 GETs; with curl);
          or hand-written: the hand-written pieces kept (JSON coder, ISO 8601) against Foundation's,
          alternating (printed only; not in all)
  --quick     tiny sizes and 2 runs, done in seconds (a smoke test; results go to .build/transfer-bench-quick)
  --runs N    runs of each figure and of its reference, alternating (default 5; relaunch at least 10)
  --out DIR   where results.json and results.md go (default Benchmarks)
  --size MiB  the download, upload, refetch, https and cpu size (default 1024)
  --tasks L   task counts for many-tasks and small-files (default 100,1000,10000; many-tasks also 100000); https uses 1000 or the largest,
              startup the largest (default 100000)
  --samples N downloads per run for event-latency (default 100)
"""

struct Settings {
    var figure = "all"
    var quick = false
    var runs = 5
    var out: String?
    var size: Int64 = 1024 << 20
    /// Task counts for small-files; many-tasks also goes to 100,000 (issue 22's scale).
    var counts = [100, 1000, 10000]
    var queuedCounts = [100, 1000, 10000, 100_000]
    /// Queued tasks in the journal for start-up: 100,000, or the largest count `--tasks` names.
    var startupTasks = 100_000
    var samples = 100

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        if let first = rest.first, !first.hasPrefix("-") {
            figure = first
            rest = rest.dropFirst()
        }
        var explicit: Set<String> = []
        func value(_ option: String) throws -> String {
            guard let value = rest.popFirst() else { throw BenchError("\(option) needs a value") }
            explicit.insert(option)
            return value
        }
        func whole(_ option: String) throws -> Int {
            guard let number = Int(try value(option)), number > 0 else { throw BenchError("\(option) needs a positive whole number") }
            return number
        }
        while let option = rest.popFirst() {
            switch option {
            case "--quick": quick = true
            case "--runs": runs = try whole(option)
            case "--out": out = try value(option)
            case "--size": size = Int64(try whole(option)) << 20
            case "--samples": samples = try whole(option)
            case "--tasks":
                let list = try value(option).split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
                guard !list.isEmpty else { throw BenchError("--tasks needs task counts, e.g. 100,1000") }
                counts = list.sorted()
                queuedCounts = counts
                startupTasks = counts.last ?? startupTasks
            default: throw BenchError("unknown option \(option)")
            }
        }
        if quick {
            if !explicit.contains("--runs") { runs = 2 }
            if !explicit.contains("--size") { size = 16 << 20 }
            if !explicit.contains("--tasks") { counts = [20, 100]; queuedCounts = counts; startupTasks = 2000 }
            if !explicit.contains("--samples") { samples = 10 }
        }
    }

    var outputDirectory: URL {
        URL(fileURLWithPath: out ?? (quick ? ".build/transfer-bench-quick" : "Benchmarks"))
    }

    /// The headline task counts: 100,000 queued tasks, 1,000 small downloads (or the largest asked for).
    var manyTasksHeadline: Int { queuedCounts.contains(100_000) ? 100_000 : queuedCounts.last! }
    var smallFilesHeadline: Int { counts.contains(1000) ? 1000 : counts.last! }
    var relaunchRuns: Int { quick ? runs : max(runs, 10) }
    var scale: ScaleBenchmark {
        ScaleBenchmark(tasks: startupTasks, sessions: quick ? 50 : 1000, extensionStarts: quick ? 10 : 100, runs: runs, entitlements: entitlements)
    }
}

let figures: [(name: String, title: String, run: (Settings, Report) throws -> Void)] = [
    ("download", "download through the daemon ÷ curl -o FILE", { settings, report in
        try DownloadBenchmark(size: settings.size, runs: settings.runs).run(into: report) }),
    ("upload", "upload through the daemon ÷ curl -T FILE", { settings, report in
        try UploadBenchmark(size: settings.size, runs: settings.runs).run(into: report) }),
    ("refetch", "bytes fetched again after a SIGKILL", { settings, report in
        try RefetchBenchmark(size: settings.quick ? 2 * settings.size : settings.size, runs: settings.runs).run(into: report) }),
    ("many-tasks", "many queued tasks", { settings, report in
        try ManyTasksBenchmark(counts: settings.queuedCounts, runs: settings.runs, entitlements: entitlements, headline: settings.manyTasksHeadline).run(into: report) }),
    ("small-files", "many small downloads ÷ curl -Z", { settings, report in
        try SmallFilesBenchmark(counts: settings.counts, runs: settings.runs, entitlements: entitlements, headline: settings.smallFilesHeadline).run(into: report) }),
    ("event-latency", "task finished → didCompleteWithError", { settings, report in
        try EventLatencyBenchmark(samplesPerRun: settings.samples, runs: settings.runs, entitlements: entitlements).run(into: report) }),
    ("relaunch", "task finished → relaunched host acknowledged", { settings, report in
        try RelaunchBenchmark(runs: settings.relaunchRuns).run(into: report) }),
    ("startup", "transferd start-up with 100,000 tasks in the journal", { settings, report in
        try settings.scale.startUp(into: report) }),
    ("sessions", "1,000 sessions in one container", { settings, report in
        try settings.scale.manySessions(into: report) }),
    ("extension-start", "fetch-extension start → task durable → exited", { settings, report in
        try settings.scale.extensionStart(into: report) }),
    ("https", "HTTPS from nginx (TLS, HTTP/2) ÷ curl --cacert", { settings, report in
        try HTTPSBenchmark(size: settings.size, count: settings.smallFilesHeadline, runs: settings.runs, entitlements: entitlements).run(into: report) }),
    ("foreground", "default sessions ÷ FoundationNetworking (upload from a file, many GETs), with curl", { settings, report in
        try ForegroundBenchmark(size: settings.size, count: settings.quick ? 100 : 10_000, runs: settings.runs, entitlements: entitlements).run(into: report) }),
    ("cpu", "transferd CPU per GiB ÷ curl's", { settings, report in
        try CPUBenchmark(size: settings.size, runs: settings.runs, entitlements: entitlements).run(into: report) }),
]

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("-h") || arguments.contains("--help") {
    print(usage)
    exit(0)
}
let settings: Settings
do { settings = try Settings(arguments) } catch {
    FileHandle.standardError.write(Data("transfer-bench: \(error)\n\(usage)\n".utf8))
    exit(64)
}
if settings.figure == "hand-written" {
    do { try HandWrittenBenchmark(runs: settings.runs, quick: settings.quick).run() } catch {
        FileHandle.standardError.write(Data("transfer-bench: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
let chosen = settings.figure == "all" ? figures : figures.filter { $0.name == settings.figure }
guard !chosen.isEmpty else {
    FileHandle.standardError.write(Data("transfer-bench: no figure named \(settings.figure)\n\(usage)\n".utf8))
    exit(64)
}

let report = Report(command: (["transfer-bench"] + arguments).joined(separator: " "), quick: settings.quick, runs: settings.runs)
var failed = 0
for figure in chosen {
    if !report.measure(id: figure.name, title: figure.title, { try figure.run(settings, report) }) { failed += 1 }
}
if chosen.contains(where: { $0.name == "https" || $0.name == "cpu" }) { BenchNginx.removeCertificates() }
RetiredScratch.removeAll()
do {
    let paths = try report.write(to: settings.outputDirectory)
    print("\nwrote \(paths.joined(separator: " and "))\n")
    print(report.markdown())
} catch {
    FileHandle.standardError.write(Data("transfer-bench: cannot write the results: \(error)\n".utf8))
    exit(1)
}
exit(failed == 0 ? 0 : 1)
