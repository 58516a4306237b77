import Foundation

/// Median, extremes and (for latencies) the 99th percentile of a set of measurements.
struct Summary: Codable {
    var median: Double
    var min: Double
    var max: Double
    var p99: Double
    var count: Int

    init?(_ values: [Double]) {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        min = sorted.first!
        max = sorted.last!
        // Nearest rank: the smallest value with at least 99 % of the values at or below it.
        p99 = sorted[Swift.max(0, Int((0.99 * Double(sorted.count)).rounded(.up)) - 1)]
        count = sorted.count
    }
}

/// What a figure must reach.
struct Target: Codable {
    enum Direction: String, Codable {
        case atMost = "<="
        case atLeast = ">="
    }
    var direction: Direction
    var value: Double
    /// Which statistic is held to the target.
    var statistic: Statistic = .median

    enum Statistic: String, Codable {
        case median, p99
    }

    static func atMost(_ value: Double, _ statistic: Statistic = .median) -> Target { Target(direction: .atMost, value: value, statistic: statistic) }
    static func atLeast(_ value: Double, _ statistic: Statistic = .median) -> Target { Target(direction: .atLeast, value: value, statistic: statistic) }

    func isMet(by summary: Summary) -> Bool {
        let value = statistic == .p99 ? summary.p99 : summary.median
        return direction == .atMost ? value <= self.value : value >= self.value
    }
}

/// One measured quantity: every value measured and their summary.
struct Measure: Codable {
    var label: String
    var unit: String
    var values: [Double]
    var summary: Summary?

    init(_ label: String, unit: String, _ values: [Double]) {
        self.label = label
        self.unit = unit
        self.values = values
        self.summary = Summary(values)
    }
}

/// One line of the results: a figure, the reference it was measured against in the same
/// run, its target and whether it was met.
struct Figure: Codable {
    var id: String
    var title: String
    var result: Measure?
    var reference: Measure?
    var target: Target?
    var met: Bool?
    /// Other quantities measured alongside (throughputs, breakdowns).
    var details: [Measure] = []
    var notes: [String] = []
    /// Why the figure could not be measured.
    var error: String?
    /// The 1-minute load average when the figure's measurement started.
    var loadAverage: Double?

    init(id: String, title: String, result: Measure?, reference: Measure? = nil, target: Target? = nil, details: [Measure] = [], notes: [String] = []) {
        self.id = id
        self.title = title
        self.result = result
        self.reference = reference
        self.target = target
        self.details = details
        self.notes = notes
        if let target, let summary = result?.summary { met = target.isMet(by: summary) }
    }

    static func failed(id: String, title: String, _ error: Error) -> Figure {
        var figure = Figure(id: id, title: title, result: nil)
        figure.error = "\(error)"
        return figure
    }
}

/// How cost grows with the number of tasks in one session: one row per task count.
struct ScalingPoint: Codable {
    var tasks: Int
    var creationRate: Summary?
    var getAllTasksMilliseconds: Summary?
    var daemonResidentMiB: Summary?
    var smallDownloadsSeconds: Summary?
    var curlSeconds: Summary?
    var ratio: Summary?
}

/// Everything one invocation measured, written as JSON and as a Markdown table.
final class Report {
    struct Host: Codable {
        var cores: Int
        var kernel: String
        var curl: String
        var loadAverageAtStart: [Double]
        var loadAverageAtEnd: [Double]?
    }

    struct Document: Codable {
        var version = 1
        var date: Date
        var command: String
        var quick: Bool
        var runs: Int
        var host: Host
        var figures: [Figure]
        var scaling: [ScalingPoint]
        var seconds: Double?
    }

    private var document: Document
    private let started = monotonicNow()

    init(command: String, quick: Bool, runs: Int) {
        document = Document(date: Date(), command: command, quick: quick, runs: runs,
                            host: Host(cores: sysconf(Int32(_SC_NPROCESSORS_ONLN)), kernel: Self.kernel(), curl: Self.curlVersion(), loadAverageAtStart: Self.loadAverage()),
                            figures: [], scaling: [])
    }

    var figures: [Figure] { document.figures }

    func add(_ figure: Figure) {
        document.figures.append(figure)
        print("  => \(Self.plain(figure))")
    }

    /// Runs one benchmark: the figures it adds are marked with the load average at its start;
    /// if it fails, a failed figure says why. Returns whether it ran to its end.
    func measure(id: String, title: String, _ body: () throws -> Void) -> Bool {
        let load = Self.loadAverage().first
        let first = document.figures.count
        print("\n== \(id) (load average \(load.map { String(format: "%.2f", $0) } ?? "?"))")
        var succeeded = true
        do { try body() } catch {
            add(.failed(id: id, title: title, error))
            succeeded = false
        }
        for index in first..<document.figures.count { document.figures[index].loadAverage = load }
        return succeeded
    }

    /// Fills in one column of the scaling table at `tasks`.
    func scale(_ tasks: Int, _ fill: (inout ScalingPoint) -> Void) {
        if let index = document.scaling.firstIndex(where: { $0.tasks == tasks }) {
            fill(&document.scaling[index])
        } else {
            var point = ScalingPoint(tasks: tasks)
            fill(&point)
            document.scaling.append(point)
            document.scaling.sort { $0.tasks < $1.tasks }
        }
    }

    /// Writes `results.json` and `results.md` into `directory`; returns their paths.
    func write(to directory: URL) throws -> [String] {
        document.host.loadAverageAtEnd = Self.loadAverage()
        document.seconds = monotonicNow() - started
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let json = directory.appendingPathComponent("results.json")
        try encoder.encode(document).write(to: json)
        let markdown = directory.appendingPathComponent("results.md")
        try Data(self.markdown().utf8).write(to: markdown)
        return [json.path, markdown.path]
    }

    // MARK: Markdown

    func markdown() -> String {
        let host = document.host
        var lines: [String] = []
        lines.append("# transfer-bench results")
        lines.append("")
        let load = host.loadAverageAtStart.map { String(format: "%.2f", $0) }.joined(separator: " ")
        let loadEnd = host.loadAverageAtEnd.map { $0.map { String(format: "%.2f", $0) }.joined(separator: " ") } ?? "?"
        lines.append("`\(document.command)`\(document.quick ? " (quick: tiny sizes, for a smoke test; not figures to quote)" : ""), \(ISO8601DateFormatter().string(from: document.date)), "
                     + "\(host.cores) cores, Linux \(host.kernel), \(host.curl); load average \(load) at the start, \(loadEnd) at the end; "
                     + "\(Self.number(document.seconds ?? 0)) s in all. At least \(document.runs) runs of each figure, alternating with its reference; "
                     + "each cell is the median (min–max).")
        lines.append("")
        lines.append("| figure | result | reference (same run) | target | met |")
        lines.append("| --- | --- | --- | --- | --- |")
        for figure in document.figures {
            let result: String
            if let error = figure.error {
                result = "failed: \(Self.escape(error))"
            } else if let measure = figure.result {
                result = Self.cell(measure, statistic: figure.target?.statistic ?? .median)
            } else {
                result = "—"
            }
            let reference = figure.reference.map { "\(Self.escape($0.label)): \(Self.cell($0))" } ?? "—"
            let target = figure.target.map { "\($0.statistic == .p99 ? "p99 " : "")\($0.direction == .atMost ? "≤" : "≥") \(Self.number($0.value)) \(figure.result?.unit ?? "")".trimmingCharacters(in: .whitespaces) } ?? "—"
            let met = figure.met.map { $0 ? "yes" : "**no**" } ?? (figure.error != nil ? "**no**" : "—")
            lines.append("| \(Self.escape(figure.title)) | \(result) | \(reference) | \(target) | \(met) |")
        }
        if !document.scaling.isEmpty {
            lines.append("")
            lines.append("## How cost grows with the tasks in one session")
            lines.append("")
            lines.append("| tasks | creation (tasks/s) | getAllTasks (ms) | daemon RSS with the tasks queued (MiB) | N downloads of 16 KiB (s) | ÷ curl -Z | per download (ms) |")
            lines.append("| ---: | --- | --- | --- | --- | --- | --- |")
            for point in document.scaling {
                let perTask = point.smallDownloadsSeconds.map { Self.number($0.median * 1000 / Double(point.tasks)) } ?? "—"
                lines.append("| \(point.tasks) | \(Self.cell(point.creationRate)) | \(Self.cell(point.getAllTasksMilliseconds)) | \(Self.cell(point.daemonResidentMiB)) | \(Self.cell(point.smallDownloadsSeconds)) | \(Self.cell(point.ratio)) | \(perTask) |")
            }
        }
        let detailed = document.figures.filter { !$0.details.isEmpty || !$0.notes.isEmpty }
        if !detailed.isEmpty {
            lines.append("")
            lines.append("## Details")
            for figure in detailed {
                lines.append("")
                lines.append("**\(figure.title)**" + (figure.loadAverage.map { String(format: " (load average %.2f when it started)", $0) } ?? ""))
                lines.append("")
                for detail in figure.details {
                    lines.append("- \(detail.label): \(Self.cell(detail))")
                }
                for note in figure.notes {
                    lines.append("- \(note)")
                }
            }
        }
        lines.append("")
        return lines.joined(separator: "\n")
    }

    /// `median unit (min–max)`; with `.p99`, also the 99th percentile.
    static func cell(_ measure: Measure, statistic: Target.Statistic = .median) -> String {
        guard let summary = measure.summary else { return "—" }
        let unit = measure.unit.isEmpty ? "" : " \(measure.unit)"
        if statistic == .p99 {
            return "p99 \(number(summary.p99))\(unit) (p50 \(number(summary.median)), max \(number(summary.max)), \(summary.count) samples)"
        }
        return "\(number(summary.median))\(unit) (\(number(summary.min))–\(number(summary.max)))"
    }

    static func cell(_ summary: Summary?) -> String {
        guard let summary else { return "—" }
        return "\(number(summary.median)) (\(number(summary.min))–\(number(summary.max)))"
    }

    /// Three significant figures, at most; whole numbers from 1000 up, with thin grouping.
    static func number(_ value: Double) -> String {
        let magnitude = abs(value)
        if magnitude >= 1000 { return String(Int(value.rounded())) }
        if magnitude >= 100 { return String(format: "%.0f", value) }
        if magnitude >= 10 { return String(format: "%.1f", value) }
        if magnitude >= 1 { return String(format: "%.2f", value) }
        if magnitude == 0 { return "0" }
        return String(format: "%.3f", value)
    }

    static func plain(_ figure: Figure) -> String {
        if let error = figure.error { return "\(figure.title): failed: \(error)" }
        let result = figure.result.map { cell($0, statistic: figure.target?.statistic ?? .median) } ?? "—"
        let reference = figure.reference.map { "; \($0.label): \(cell($0))" } ?? ""
        let met = figure.met.map { $0 ? " — target met" : " — target MISSED" } ?? ""
        return "\(figure.title): \(result)\(reference)\(met)"
    }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "\n", with: " ")
    }

    // MARK: The machine

    static func loadAverage() -> [Double] {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return [] }
        return text.split(separator: " ").prefix(3).compactMap { Double($0) }
    }

    private static func kernel() -> String {
        var name = utsname()
        uname(&name)
        return withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    private static func curlVersion() -> String {
        let output = (try? runProcess("/usr/bin/env", ["curl", "--version"], timeout: 10, capture: true).output) ?? ""
        let first = output.split(separator: "\n").first.map(String.init) ?? "curl ?"
        return first.split(separator: " ").prefix(2).joined(separator: " ")
    }
}
