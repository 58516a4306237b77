import Foundation
import LoopbackServer
import ContainerInspection

/// A download through the daemon into a file (`fetch-extension download URL --wait`,
/// process start to exit, the file moved into the app group) against `curl -o FILE` from the
/// same server, runs alternating; `curl -o /dev/null` shows what the server alone can give;
/// the daemon's peak resident memory (VmHWM) during each download.
struct DownloadBenchmark {
    let size: Int64
    let runs: Int

    func run(into report: Report) throws {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let url = try container.servePayload(size: size)
        let daemon = try container.startDaemon()
        let curlFile = container.parent.appendingPathComponent("curl-output.bin").path
        let delivered = container.standInGroup.appendingPathComponent("Downloads/payload.bin").path
        let mebibytes = Double(size) / 1048576
        // Whole minutes for a slow disk, never unbounded.
        let timeout = max(120, mebibytes / 4)

        print("download: \(size >> 20) MiB into a file, \(runs) runs each, alternating")
        var curlTimes: [Double] = [], nullTimes: [Double] = [], daemonTimes: [Double] = [], peaks: [Double] = [], syncTimes: [Double] = []
        let peakIsPerRun = ResidentMemory.resetPeak(pid: daemon)
        var follower = LogFollower(layout: container.layout)
        var relaunches = 0
        // One round of each side first, not counted: the first GiB written after a quiet spell
        // goes slower on this disk, whichever side writes it.
        for run in 0...runs {
            let null = try container.timedCurl(["-o", "/dev/null", url], timeout: timeout)
            var curl = 0.0, viaDaemon = 0.0, sync = 0.0, peak = 0.0
            // Each goes first every other run, so that neither always finds a warmer cache.
            for first in run % 2 == 1 ? [true, false] : [false, true] {
                if first {
                    curl = try container.timedCurl(["-o", curlFile, url], timeout: timeout)
                    guard fileSize(curlFile) == size else { throw BenchError("curl wrote \(fileSize(curlFile)) bytes, not \(size)") }
                    // What the daemon does and curl does not: make the file durable.
                    sync = try timed { try container.runCommand("/usr/bin/env", ["sync", curlFile], timeout: timeout) }
                    unlink(curlFile)
                } else {
                    _ = ResidentMemory.resetPeak(pid: daemon)
                    viaDaemon = try container.timedRun("fetch-extension", ["download", url, "--wait"], timeout: timeout)
                    peak = try ResidentMemory(pid: daemon).peak
                    guard fileSize(delivered) == size else { throw BenchError("the daemon delivered \(fileSize(delivered)) bytes, not \(size)") }
                    unlink(delivered)
                    let launched = try container.settleStandIns(&follower)
                    if run > 0 { relaunches += launched }
                }
            }
            let line = String(format: "curl -o /dev/null %.3f s, curl -o FILE %.3f s (then sync FILE %.3f s), daemon %.3f s, ratio %.3f, daemon peak RSS %.1f MiB", null, curl, sync, viaDaemon, viaDaemon / curl, peak)
            peaks.append(peak) // the first download's peak counts too
            guard run > 0 else {
                print("  warm-up (times not counted): " + line)
                continue
            }
            nullTimes.append(null)
            curlTimes.append(curl)
            syncTimes.append(sync)
            daemonTimes.append(viaDaemon)
            print("  run \(run): " + line)
        }
        let ratios = zip(daemonTimes, curlTimes).map { $0 / $1 }
        let rate = { (times: [Double]) in times.map { mebibytes / $0 } }
        report.add(Figure(id: "download.ratio", title: "\(size >> 20) MiB download through the daemon into a file, time ÷ `curl -o FILE`",
                          result: Measure("daemon ÷ curl", unit: "", ratios),
                          reference: Measure("curl -o FILE", unit: "s", curlTimes),
                          target: .atMost(1.10),
                          details: [Measure("daemon (`fetch-extension download URL --wait`, process start to exit)", unit: "s", daemonTimes),
                                    Measure("daemon throughput", unit: "MiB/s", rate(daemonTimes)),
                                    Measure("curl -o FILE throughput", unit: "MiB/s", rate(curlTimes)),
                                    Measure("`sync FILE` of curl's file right after it (not part of curl's time)", unit: "s", syncTimes),
                                    Measure("daemon ÷ (curl -o FILE + sync FILE)", unit: "", zip(daemonTimes, zip(curlTimes, syncTimes)).map { $0 / ($1.0 + $1.1) })],
                          notes: ["The daemon's time includes starting the extension, its session and the move of the finished file into the app group; both write the file into the page cache of the same file system, and the daemon makes it durable (fsync) before announcing it, which curl does not.",
                                  "One round of each side (curl, then the daemon) comes first and is not counted: on this disk the first GiB written after a quiet spell goes slower, whichever side writes it.",
                                  relaunchNote(relaunches, runs: runs, standIn: "fetch-extension")]))
        report.add(Figure(id: "download.server", title: "`curl -o /dev/null` from the loopback server (what the server alone gives)",
                          result: Measure("curl -o /dev/null", unit: "MiB/s", rate(nullTimes)),
                          details: [Measure("curl -o /dev/null", unit: "s", nullTimes)]))
        report.add(Figure(id: "download.memory", title: "transferd peak resident memory during the \(size >> 20) MiB download (VmHWM)",
                          result: Measure("VmHWM", unit: "MiB", peaks),
                          target: .atMost(64),
                          notes: [peakIsPerRun ? "VmHWM reset (`/proc/PID/clear_refs`) before each download, read after it; the warm-up download counts here." : "The kernel refused to reset VmHWM: each value is the daemon's peak since it started."]))
    }
}
