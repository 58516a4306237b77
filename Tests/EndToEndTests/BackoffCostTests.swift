import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// One app's dead tasks (issue 45 §3): thousands of tasks to a closed port, each waiting out
/// its retry's backoff, must not slow another app down. Another app's small download is
/// timed from `resume()` to its completion (which comes after its first byte) while the dead
/// tasks churn, and again just after a daemon restart, at two sizes: the time must stay
/// under 0.2 s at both, so it does not grow with the number of tasks in backoff.
///
/// A measurement of wall time, so it runs only when asked for, on a machine doing nothing
/// else: `BGTRANSFER_TIMING_TESTS=1 swift test --skip-build --filter BackoffCostTests` (each
/// test prints a line starting "backoff cost:"). The parking itself is `DatedHoldsTests`'s
/// and `SchedulerTests`'.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class BackoffCostTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Another app's first byte, at most (S5: the daemon's slots are shared by app).
    static let bound: TimeInterval = 0.2

    @Test("Another app's download completes within 0.2 s of resume() while one app's 5,000 or 20,000 tasks to a closed port wait out their backoffs, and just after a restart of the daemon",
          .enabled(if: ProcessInfo.processInfo.environment["BGTRANSFER_TIMING_TESTS"] != nil, "a timing, run by hand"),
          arguments: [5_000, 20_000])
    func deadTasksDoNotDelayAnotherApp(deadTasks: Int) throws {
        var daemon = try seedDeadTasks(deadTasks)
        server.serve("/small.bin", data: testPayload(size: 4_096, seed: 45))
        let delegate = RecordingDelegate()
        let other = fixture.session("other", delegate: delegate)
        // Churning: the first retries of the dead tasks have come and gone.
        try #require(container.waitForLog(timeout: 60) { entry in
            guard entry.process == "transferd", case .retry(let attempt, _, _) = entry.hold else { return false }
            return attempt >= 9
        } != nil,
                     "the dead tasks were not retried")
        let cpuBefore = Self.cpuSeconds(of: daemon.pid), wallBefore = Date()
        let running = try (0..<10).map { _ in try timeDownload(in: other, delegate: delegate) }
        let cpu = (Self.cpuSeconds(of: daemon.pid) - cpuBefore) / Date().timeIntervalSince(wallBefore)

        daemon.process.kill(signal: SIGKILL)
        _ = daemon.process.wait(timeout: 10)
        daemon = try DaemonUnderTest.start(container, readyWithin: 60)
        // The library reconnects on its own backoff (up to 1 s, whatever the daemon holds):
        // the downloads are timed once it has, by a listing answered by the new daemon.
        let answering = Date()
        try #require(allTasks(other, timeout: 60) != nil, "the session did not reconnect")
        let reconnected = Date().timeIntervalSince(answering)
        let restarted = try (0..<10).map { _ in try timeDownload(in: other, delegate: delegate) }
        print("backoff cost: \(deadTasks) dead tasks; another app's download, resume() to completion, running: "
              + "\(Self.milliseconds(running)) (daemon at \(Int(cpu * 100)) % of a core); after a restart: \(Self.milliseconds(restarted)) "
              + "(the session reconnected and listed its tasks in \(Self.milliseconds([reconnected])))")
        #expect(running.max() ?? .infinity < Self.bound, "while running: \(Self.milliseconds(running))")
        #expect(restarted.max() ?? .infinity < Self.bound, "after a restart: \(Self.milliseconds(restarted))")
        _ = daemon
    }

    /// Makes the host app's session, then appends `count` running tasks to a closed port to its
    /// journal, each already retried 8 times (so its next wait is the longest backoff, 30 s)
    /// and due at a time spread over the next 30 s: from the start some come due every moment,
    /// are tried, fail and wait 30 s again, while the others wait out their backoff. Returns
    /// the daemon, started on them.
    private func seedDeadTasks(_ count: Int) throws -> DaemonUnderTest {
        var daemon = try DaemonUnderTest.start(container)
        let made = try Executable.hostApp.run(["download", "http://127.0.0.1:9/dead-0"], in: container)
        try #require(made.status == 0, "\(made.stderr)")
        daemon.process.kill(signal: SIGKILL)
        _ = daemon.process.wait(timeout: 10)
        let path = JournalContents.path(inSession: container.sessionDirectory("com.example.host.background"))
        let journal = try SessionJournal(path: path, contents: JournalContents.read(path))
        let now = Date()
        for number in 1_000..<(1_000 + count) {
            var task = TaskRecord(taskIdentifier: number, kind: .download,
                                  originalRequest: RequestRecord(url: "http://127.0.0.1:9/dead-\(number)"))
            task.state = .running
            task.retryCount = 8
            task.retryNotBefore = now.addingTimeInterval(30 * Double(number % 1_000) / 1_000)
            try journal.append(.task(task))
        }
        try journal.commit()
        daemon = try DaemonUnderTest.start(container, readyWithin: 60)
        return daemon
    }

    /// Seconds from `resume()` to the completion of a 4 KiB download of the other app.
    private func timeDownload(in session: URLSession, delegate: RecordingDelegate) throws -> TimeInterval {
        let task = session.downloadTask(with: server.url(for: "/small.bin"))
        let started = Date()
        task.resume()
        try #require(delegate.wait(timeout: 60, for: completed(task, status: 200)), "\(delegate.calls)")
        return Date().timeIntervalSince(started)
    }

    /// The CPU time a process has used (user and system), from `/proc/<pid>/stat`.
    private static func cpuSeconds(of pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    private static func milliseconds(_ times: [TimeInterval]) -> String {
        times.map { String(format: "%.0f ms", $0 * 1000) }.joined(separator: ", ")
    }
}
}
