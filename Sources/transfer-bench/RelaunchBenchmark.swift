import Foundation
import LoopbackServer
import ContainerInspection
import TransferLogging
import TransferPOSIX

/// From the last task of a session finishing, with no process attached, to the relaunched
/// host app having acknowledged its events: `fetch-extension download URL` starts a download
/// and exits; the daemon finishes it, launches `host-app --handle-events-for-background-session`,
/// which takes the events and calls its completion handler. Both ends are the daemon's own
/// log lines (`finished: …` and `events through N acknowledged`, an info line: this daemon
/// runs with BGTRANSFER_LOG_LEVEL=info).
///
/// Reference, alternating: a user launch of `host-app` (no arguments: it opens its session,
/// finds nothing to do and exits), timed from spawn to exit — what starting the app costs.
struct RelaunchBenchmark {
    let runs: Int

    /// The phases of one relaunch, in seconds on the daemon's (and the app's) log clock.
    struct Phases {
        var finished: Double
        var launched: Double
        var appStarted: Double
        var acknowledged: Double
        var pid: Int32
        /// The daemon's line saying the app exited was read already.
        var exitSeen: Bool
    }

    func run(into report: Report) throws {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        // Slow enough (about 250 ms) that the extension has exited when the task finishes:
        // otherwise it could take the event itself and nothing would be relaunched.
        server.serve("/relaunch.bin", data: Data(repeating: 0x5A, count: 16 << 10), options: RouteOptions(bytesPerSecond: 64 << 10))
        let url = server.url(for: "/relaunch.bin").absoluteString
        _ = try container.startDaemon(environment: ["BGTRANSFER_LOG_LEVEL": "info"])

        print("relaunch: task finished with nobody attached → relaunched host-app acknowledged, \(runs) runs, alternating with a user launch of host-app")
        var phases: [Phases] = []
        var userLaunches: [Double] = []
        var launched: [Int32] = []
        defer { endLeftoverApps(launched, container: container) }
        for run in 1...runs {
            var follower = LogFollower(layout: container.layout)
            for first in run % 2 == 1 ? [true, false] : [false, true] {
                if first {
                    userLaunches.append(try container.timedRun("host-app", [], timeout: 60))
                } else {
                    guard try container.run("fetch-extension", ["download", url], timeout: 60) == 0 else { throw BenchError("fetch-extension failed") }
                    let phase = try waitForRelaunch(&follower, launched: &launched)
                    phases.append(phase)
                    print(String(format: "  run %d: finished → launched %.1f ms → app started %.1f ms → acknowledged %.1f ms; total %.1f ms",
                                 run, (phase.launched - phase.finished) * 1000, (phase.appStarted - phase.launched) * 1000, (phase.acknowledged - phase.appStarted) * 1000, (phase.acknowledged - phase.finished) * 1000))
                    if !phase.exitSeen { try waitForExit(of: phase.pid, &follower) }
                }
            }
        }
        let milliseconds = { (from: KeyPath<Phases, Double>, to: KeyPath<Phases, Double>) in phases.map { ($0[keyPath: to] - $0[keyPath: from]) * 1000 } }
        report.add(Figure(id: "relaunch", title: "last task of a session finished → relaunched host has acknowledged",
                          result: Measure("latency", unit: "ms", milliseconds(\.finished, \.acknowledged)),
                          reference: Measure("user launch of host-app, spawn to exit", unit: "ms", userLaunches.map { $0 * 1000 }),
                          target: .atMost(300),
                          details: [Measure("finished → daemon spawned host-app", unit: "ms", milliseconds(\.finished, \.launched)),
                                    Measure("spawned → host-app's first log line (launched to handle events)", unit: "ms", milliseconds(\.launched, \.appStarted)),
                                    Measure("first line → events acknowledged", unit: "ms", milliseconds(\.appStarted, \.acknowledged))],
                          notes: ["transferd runs with `--relaunch-delay 0.05`; runs are far enough apart that the rate limiter starts over each time."]))
    }

    private static let session = "com.example.host.fetch.background"

    /// Reads the log until the relaunched app has acknowledged the session's events.
    private func waitForRelaunch(_ follower: inout LogFollower, launched: inout [Int32]) throws -> Phases {
        var finished: Double?, spawned: Double?, appStarted: Double?, pid: Int32?
        let deadline = monotonicNow() + 30
        while monotonicNow() < deadline {
            let entries = follower.next()
            for (index, entry) in entries.enumerated() where entry.session == Self.session {
                let time = entry.time.timeIntervalSince1970
                switch (entry.process, entry.category) {
                case ("transferd", "transfers") where entry.message.hasPrefix("finished:"):
                    finished = time
                case ("transferd", _) where entry.event?.kind == .launched:
                    spawned = time
                    pid = entry.event?.pid
                    if let pid { launched.append(pid) }
                case ("host-app", _) where entry.event?.kind == .launchedForEvents:
                    appStarted = time
                case ("transferd", "events") where entry.message.hasPrefix("events through"):
                    guard let finished, let spawned, let appStarted, let pid else {
                        throw BenchError("events were acknowledged without the expected relaunch (finished \(finished != nil), launched \(spawned != nil), app started \(appStarted != nil))")
                    }
                    // The app's exit may be among the lines read with this one (a quick app's
                    // is): the next wait must not look for it again.
                    let exited = entries[(index + 1)...].contains { Self.isExit(of: pid, $0) }
                    return Phases(finished: finished, launched: spawned, appStarted: appStarted, acknowledged: time, pid: pid, exitSeen: exited)
                default:
                    break
                }
            }
            usleep(2_000)
        }
        throw BenchError("no relaunch acknowledged within 30 s (finished \(finished != nil), launched \(spawned != nil), app started \(appStarted != nil))")
    }

    /// Waits until the daemon has seen the launched app exit, so that the next run's launch is not held back.
    private func waitForExit(of pid: Int32, _ follower: inout LogFollower) throws {
        let deadline = monotonicNow() + 30
        while monotonicNow() < deadline {
            if follower.next().contains(where: { Self.isExit(of: pid, $0) }) { return }
            usleep(2_000)
        }
        throw BenchError("the relaunched host-app (pid \(pid)) did not exit within 30 s")
    }

    /// The daemon's line saying that the app it launched as `pid` exited.
    private static func isExit(of pid: Int32, _ entry: LogEntry) -> Bool {
        entry.process == "transferd" && entry.event?.kind == .launchedAppExited && entry.event?.pid == pid
    }

    /// Ends relaunched apps still running (the daemon started them for this benchmark).
    private func endLeftoverApps(_ pids: [Int32], container: BenchContainer) {
        for pid in pids {
            guard let arguments = ProcessSpawner.commandLine(of: pid), arguments.contains(container.layout.root.path) else { continue }
            kill(pid, SIGKILL)
        }
    }
}
