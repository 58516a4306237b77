import BackgroundTransfer
import LoopbackServer
import TransferPOSIX

/// Many small downloads in one session (each URL its own 16 KiB file), from the first
/// `downloadTask(with:)` to the last `didCompleteWithError`, every file moved into a folder,
/// against `curl --parallel --parallel-max 6` over the same URLs (a config file listing each
/// URL and its output), runs alternating. Six is also the session's default
/// `httpMaximumConnectionsPerHost`.
///
/// A second reference, in the same runs: the disk's floor for what the daemon promises and
/// curl does not, a file durable before anyone hears of it. As many 16 KiB files created,
/// written, synced (`fdatasync`) and renamed into a folder in this process, six at a time
/// with their writeback started together and the folder synced once per six, as the
/// daemon's group commit does; no network, no other process.
struct SmallFilesBenchmark {
    let counts: [Int]
    let runs: Int
    let entitlements: String
    let headline: Int
    static let fileSize = 16 << 10

    func run(into report: Report) throws {
        for count in counts {
            let (daemonTimes, curlTimes, floorTimes, cpu) = try measure(count: count)
            let ratios = zip(daemonTimes, curlTimes).map { $0 / $1 }
            report.scale(count) { point in
                point.smallDownloadsSeconds = Summary(daemonTimes)
                point.curlSeconds = Summary(curlTimes)
                point.ratio = Summary(ratios)
            }
            // Every count is a figure: the target holds at each.
            report.add(Figure(id: count == headline ? "small.ratio" : "small.ratio.\(count)", title: "\(count) downloads of 16 KiB in one session, time ÷ `curl --parallel --parallel-max 6`",
                              result: Measure("daemon ÷ curl", unit: "", ratios),
                              reference: Measure("curl -Z", unit: "s", curlTimes),
                              target: .atMost(1.3),
                              details: [Measure("daemon (first task created to last didCompleteWithError)", unit: "s", daemonTimes),
                                        Measure("the durable floor: files written, synced and renamed in one process, six at a time", unit: "s", floorTimes),
                                        Measure("daemon ÷ the durable floor", unit: "", zip(daemonTimes, floorTimes).map { $0 / $1 }),
                                        Measure("durable floor per file", unit: "ms", floorTimes.map { $0 * 1000 / Double(count) }),
                                        Measure("daemon per download", unit: "ms", daemonTimes.map { $0 * 1000 / Double(count) }),
                                        Measure("curl per download", unit: "ms", curlTimes.map { $0 * 1000 / Double(count) }),
                                        Measure("transferd's CPU per download (every thread)", unit: "ms", cpu.daemon.map { $0 * 1000 / Double(count) }),
                                        Measure("this process's CPU per download (the library, the delegate's move, the loopback server)", unit: "ms", cpu.app.map { $0 * 1000 / Double(count) }),
                                        Measure("both ÷ 2 cores: the least time per download the two processes' work allows", unit: "ms", zip(cpu.daemon, cpu.app).map { ($0 + $1) * 1000 / Double(count) / 2 }),
                                        Measure("the durable floor's CPU per file", unit: "ms", cpu.floor.map { $0 * 1000 / Double(count) })],
                              notes: ["Tasks are created and resumed one after another from one thread, as an app would; each finished file is moved into a folder in didFinishDownloadingTo.",
                                      "CPU times: transferd's from `/proc/PID/stat` (10 ms ticks), this process's from `getrusage`, each over the daemon's part of a run; the floor's over its own part."]))
        }
    }

    /// CPU seconds of each run: transferd's and this process's during the daemon's part, and
    /// this process's during the floor's.
    private struct RunCPU {
        var daemon: [Double] = [], app: [Double] = [], floor: [Double] = []
    }

    private func measure(count: Int) throws -> (daemon: [Double], curl: [Double], floor: [Double], cpu: RunCPU) {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        var payload = Data(count: Self.fileSize)
        payload.withUnsafeMutableBytes { bytes in for i in bytes.indices { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) } }
        let urls = (0..<count).map { server.url(for: "/small/\($0).bin") }
        for index in 0..<count { server.serve("/small/\(index).bin", data: payload) }
        let daemonPID = try container.startDaemon()
        let app = try BenchApp(entitlements: entitlements, container: container)
        let config = container.parent.appendingPathComponent("curl.config")
        let timeout = max(120, Double(count) * 0.2)

        print("small files: \(count) downloads of \(Self.fileSize >> 10) KiB in one session, \(runs) runs each, alternating with curl -Z")
        var daemonTimes: [Double] = [], curlTimes: [Double] = [], floorTimes: [Double] = []
        var cpu = RunCPU()
        for run in 1...runs {
            let daemonOut = container.parent.appendingPathComponent("daemon-\(run)")
            let curlOut = container.parent.appendingPathComponent("curl-\(run)")
            // Each run's files stay until the container goes: on ext4 without a journal, files
            // deleted just before a run make every file that run creates slower, whichever side.
            var daemon = 0.0, curl = 0.0, floor = 0.0
            let sides = ["curl", "daemon", "floor"]
            let turn = (run - 1) % sides.count
            let order: [String] = Array(sides[turn...]) + Array(sides[..<turn]) // which goes first rotates
            for side in order {
                if side == "floor" {
                    let before = ProcessCPU.ofSelf()
                    floor = try durableFloor(count: count, payload: payload, in: container.parent.appendingPathComponent("floor-\(run)"))
                    cpu.floor.append((ProcessCPU.ofSelf() - before).cpuSeconds)
                } else if side == "curl" {
                    try FileManager.default.createDirectory(at: curlOut, withIntermediateDirectories: true)
                    let lines = urls.enumerated().map { "url = \"\($1.absoluteString)\"\noutput = \"\(curlOut.path)/\($0).bin\"" }
                    try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: config)
                    curl = try container.timedCurl(["--parallel", "--parallel-max", "6", "-K", config.path], timeout: timeout)
                    let files = (try? FileManager.default.contentsOfDirectory(atPath: curlOut.path).count) ?? 0
                    guard files == count else { throw BenchError("curl wrote \(files) of \(count) files") }
                } else {
                    let daemonBefore = try ProcessCPU(pid: daemonPID), before = ProcessCPU.ofSelf()
                    daemon = try app.download(urls, into: daemonOut, timeout: timeout)
                    cpu.app.append((ProcessCPU.ofSelf() - before).cpuSeconds)
                    cpu.daemon.append((try ProcessCPU(pid: daemonPID) - daemonBefore).cpuSeconds)
                }
            }
            daemonTimes.append(daemon)
            curlTimes.append(curl)
            floorTimes.append(floor)
            print(String(format: "  run %d: curl -Z %.3f s, daemon %.3f s, ratio %.2f; durable floor %.3f s", run, curl, daemon, daemon / curl, floor))
        }
        return (daemonTimes, curlTimes, floorTimes, cpu)
    }

    /// Seconds to make `count` files of `payload` durable in `directory` and rename each
    /// into `directory/moved` (the app's move, which nobody syncs): six at a time, writeback
    /// started for the six, each synced, the folder synced once per six.
    private func durableFloor(count: Int, payload: Data, in directory: URL) throws -> Double {
        let moved = directory.appendingPathComponent("moved")
        try DurableFile.makeDirectory(moved.path)
        let start = monotonicNow()
        var batch: [(FileDescriptor, String)] = []
        func commit() throws {
            for (file, _) in batch { file.startWriteback(from: 0, length: 0) }
            for (file, _) in batch {
                try file.sync()
                file.close()
            }
            try DurableFile.syncDirectory(directory.path)
            for (_, path) in batch {
                guard rename(path, moved.path + "/" + (path as NSString).lastPathComponent) == 0 else { throw Errno.current("rename", path: path) }
            }
            batch.removeAll()
        }
        for number in 0..<count {
            let path = directory.path + "/\(number).bin"
            let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC)
            try file.writeAll(payload)
            batch.append((file, path))
            if batch.count == 6 { try commit() }
        }
        if !batch.isEmpty { try commit() }
        return monotonicNow() - start
    }
}
