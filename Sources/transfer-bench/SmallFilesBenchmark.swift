import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// Many small downloads in one session (each URL its own 16 KiB file), from the first
/// `downloadTask(with:)` to the last `didCompleteWithError`, every file moved into a folder,
/// against `curl --parallel --parallel-max 6` over the same URLs (a config file listing each
/// URL and its output), runs alternating. Six is also the session's default
/// `httpMaximumConnectionsPerHost`.
struct SmallFilesBenchmark {
    let counts: [Int]
    let runs: Int
    let entitlements: String
    let headline: Int
    static let fileSize = 16 << 10

    func run(into report: Report) throws {
        for count in counts {
            let (daemonTimes, curlTimes) = try measure(count: count)
            let ratios = zip(daemonTimes, curlTimes).map { $0 / $1 }
            report.scale(count) { point in
                point.smallDownloadsSeconds = Summary(daemonTimes)
                point.curlSeconds = Summary(curlTimes)
                point.ratio = Summary(ratios)
            }
            guard count == headline else { continue }
            report.add(Figure(id: "small.ratio", title: "\(count) downloads of 16 KiB in one session, time ÷ `curl --parallel --parallel-max 6`",
                              result: Measure("daemon ÷ curl", unit: "", ratios),
                              reference: Measure("curl -Z", unit: "s", curlTimes),
                              target: .atMost(1.5),
                              details: [Measure("daemon (first task created to last didCompleteWithError)", unit: "s", daemonTimes),
                                        Measure("daemon per download", unit: "ms", daemonTimes.map { $0 * 1000 / Double(count) }),
                                        Measure("curl per download", unit: "ms", curlTimes.map { $0 * 1000 / Double(count) })],
                              notes: ["Tasks are created and resumed one after another from one thread, as an app would; each finished file is moved into a folder in didFinishDownloadingTo."]))
        }
    }

    private func measure(count: Int) throws -> (daemon: [Double], curl: [Double]) {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        var payload = Data(count: Self.fileSize)
        payload.withUnsafeMutableBytes { bytes in for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) } }
        let urls = (0..<count).map { server.url(for: "/small/\($0).bin") }
        for index in 0..<count { server.serve("/small/\(index).bin", data: payload) }
        _ = try container.startDaemon()
        let app = try BenchApp(entitlements: entitlements, container: container)
        let config = container.parent.appendingPathComponent("curl.config")
        let timeout = max(120, Double(count) * 0.2)

        print("small files: \(count) downloads of \(Self.fileSize >> 10) KiB in one session, \(runs) runs each, alternating with curl -Z")
        var daemonTimes: [Double] = [], curlTimes: [Double] = []
        for run in 1...runs {
            let daemonOut = container.parent.appendingPathComponent("daemon-\(run)")
            let curlOut = container.parent.appendingPathComponent("curl-\(run)")
            // Each run's files stay until the container goes: on ext4 without a journal, files
            // deleted just before a run make every file that run creates slower, whichever side.
            var daemon = 0.0, curl = 0.0
            for first in run % 2 == 1 ? [true, false] : [false, true] {
                if first {
                    try FileManager.default.createDirectory(at: curlOut, withIntermediateDirectories: true)
                    let lines = urls.enumerated().map { "url = \"\($1.absoluteString)\"\noutput = \"\(curlOut.path)/\($0).bin\"" }
                    try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: config)
                    curl = try container.timedCurl(["--parallel", "--parallel-max", "6", "-K", config.path], timeout: timeout)
                    let files = (try? FileManager.default.contentsOfDirectory(atPath: curlOut.path).count) ?? 0
                    guard files == count else { throw BenchError("curl wrote \(files) of \(count) files") }
                } else {
                    daemon = try app.download(urls, into: daemonOut, timeout: timeout)
                }
            }
            daemonTimes.append(daemon)
            curlTimes.append(curl)
            print(String(format: "  run %d: curl -Z %.3f s, daemon %.3f s, ratio %.2f", run, curl, daemon, daemon / curl))
        }
        return (daemonTimes, curlTimes)
    }
}
