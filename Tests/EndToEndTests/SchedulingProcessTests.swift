import Foundation
import Testing
import LoopbackServer
import TransferContainer
import ContainerInspection

/// Scheduling with real processes: the stand-ins' command-line options, work created in the
/// background, the daemon's global limit and the resume rate limiter (S5, S6.5).
// The limit also counts time spent waiting for a cooperative thread (see RangeTests).
@Suite(.timeLimit(.minutes(20)))
struct SchedulingProcessTests {
    static let hostSession = "com.example.host.background"
    static let fetchSession = "com.example.host.fetch.background"

    /// A container, a loopback server serving `paths`, and a daemon started with `daemonArguments`.
    final class Stage {
        let container: TestContainer
        let server: LoopbackServer

        /// `bytesPerSecond`: every path is served that slowly (nil: at once).
        init(paths: [String], daemonArguments: [String] = ["--relaunch-delay", "0.1"], bytesPerSecond: Int? = nil) throws {
            container = try TestContainer()
            server = try LoopbackServer()
            for (index, path) in paths.enumerated() {
                server.serve(path, data: testPayload(size: 32 << 10, seed: UInt64(index + 1)), options: RouteOptions(bytesPerSecond: bytesPerSecond))
            }
            _ = try DaemonUnderTest.start(container, extraArguments: daemonArguments)
        }

        deinit {
            server.stop()
            container.tearDown()
        }

        func url(_ path: String) -> String { server.url(for: path).absoluteString }

        func requests(to path: String) -> [RecordedRequest] { server.requests.filter { $0.path == path } }

        func run(_ executable: Executable, _ arguments: [String]) throws {
            let outcome = try executable.run(arguments, in: container)
            #expect(outcome.status == 0, "\(executable.name) \(arguments): \(outcome.stderr)")
        }

        func snapshot() -> ContainerSnapshot { ContainerSnapshot.read(container.layout) }

        func task(in session: String, url path: String) -> TaskRecord? {
            snapshot().sessions.first { $0.identifier == session }?.tasks.first { $0.originalRequest.url == url(path) }
        }

        func waiting(in session: String, url path: String) -> String? {
            guard let session = snapshot().sessions.first(where: { $0.identifier == session }),
                  let task = session.tasks.first(where: { $0.originalRequest.url == url(path) }) else { return nil }
            return session.waiting[String(task.taskIdentifier)]
        }

        func hostRelaunchDelay() -> Double? {
            snapshot().apps.first { $0.bundleIdentifier == "com.example.host" }?.relaunchDelay
        }

        /// The host's relaunches so far, as the daemon logged them.
        func hostRelaunches() -> Int {
            container.logEntries(process: "transferd").filter { $0.launched("com.example.host") != nil }.count
        }

        func completionHandlerCalls(of process: String) -> Int {
            container.logEntries(process: process).filter(\.isCompletionHandlerCall).count
        }

        /// Waits until no event of the fetch session waits (no host will be launched for it) and
        /// every host the daemon launched has exited. A host that called its completion handler
        /// still holds the extension's session until it exits: an extension started then gets
        /// -996 (seen beside two CPU hogs, issue 44).
        func waitUntilRelaunchedHostsExited(timeout: TimeInterval = 30) -> Bool {
            waitUntil(timeout: timeout) {
                let daemonLines = container.logEntries(process: "transferd")
                let launched = daemonLines.compactMap { $0.launched("com.example.host") }
                let pending = container.pendingEvents(SchedulingProcessTests.fetchSession)
                return pending.isEmpty && launched.allSatisfy(Self.hasExited)
            }
        }

        /// Whether `pid` is gone or a zombie (its locks went with its exit).
        static func hasExited(_ pid: Int32) -> Bool {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let afterName = stat.range(of: ") ", options: .backwards) else { return true }
            let state = stat[afterName.upperBound...].first
            return state == "Z" || state == "X"
        }
    }

    @Test("Tasks an extension creates are discretionary and wait on battery, as does host-app download --discretionary; a plain download runs (S5)")
    func backgroundWorkIsDiscretionary() throws {
        let stage = try Stage(paths: ["/ext.bin", "/flagged.bin", "/plain.bin"])
        try stage.run(.bgtransfer, ["conditions", "--power", "battery"])
        try stage.run(.fetchExtension, ["download", stage.url("/ext.bin")])
        try stage.run(.hostApp, ["download", stage.url("/flagged.bin"), "--discretionary"])
        try stage.run(.hostApp, ["download", stage.url("/plain.bin")])
        #expect(waitUntil { stage.requests(to: "/plain.bin").count == 1 }, "a download the user started in the foreground runs on battery")

        let extensionTask = try #require(stage.task(in: Self.fetchSession, url: "/ext.bin"))
        #expect(extensionTask.createdInBackground && extensionTask.requirements.isDiscretionary, "an extension's task is always discretionary")
        #expect(stage.waiting(in: Self.fetchSession, url: "/ext.bin") == "discretionary: waiting for power")
        #expect(stage.waiting(in: Self.hostSession, url: "/flagged.bin") == "discretionary: waiting for power")
        #expect(stage.requests(to: "/ext.bin").isEmpty && stage.requests(to: "/flagged.bin").isEmpty)
        let inspect = try Executable.bgtransfer.run(["inspect"], in: stage.container)
        #expect(inspect.stdout.contains("conditions: network wifi, expensive off, constrained off, power battery, low power mode off"), "\(inspect.stdout)")
        #expect(inspect.stdout.contains("discretionary [discretionary: waiting for power]"), "\(inspect.stdout)")

        try stage.run(.bgtransfer, ["conditions", "--power", "charging"])
        #expect(stage.container.waitForCompletionHandler(of: "host-app", session: Self.fetchSession) != nil,
                "on power the extension's download finishes and the host is relaunched for it")
        #expect(FileManager.default.fileExists(atPath: stage.container.downloads.appendingPathComponent("ext.bin").path))
        #expect(waitUntil { stage.requests(to: "/flagged.bin").count == 1 })
    }

    @Test("host-app download --no-cellular, --no-expensive and --no-constrained wait on such a network; a plain download runs there")
    func networkFlagsOfTheCommandLine() throws {
        let stage = try Stage(paths: ["/no-cellular.bin", "/no-expensive.bin", "/no-constrained.bin", "/any.bin"])
        try stage.run(.bgtransfer, ["conditions", "--network", "cellular", "--expensive", "on", "--constrained", "on"])
        for flag in ["--no-cellular", "--no-expensive", "--no-constrained"] {
            try stage.run(.hostApp, ["download", stage.url("/\(flag.dropFirst(2)).bin"), flag])
        }
        try stage.run(.hostApp, ["download", stage.url("/any.bin")])
        #expect(waitUntil { stage.requests(to: "/any.bin").count == 1 }, "a download that may use any network runs")
        #expect(stage.waiting(in: Self.hostSession, url: "/no-cellular.bin") == "waiting for connectivity: only cellular, and cellular access is not allowed")
        #expect(stage.waiting(in: Self.hostSession, url: "/no-expensive.bin") == "waiting for connectivity: the network is expensive, and expensive network access is not allowed")
        #expect(stage.waiting(in: Self.hostSession, url: "/no-constrained.bin") == "waiting for connectivity: the network is constrained (Low Data Mode), and constrained network access is not allowed")
        try stage.run(.bgtransfer, ["conditions", "--network", "wifi", "--expensive", "off", "--constrained", "off"])
        #expect(waitUntil { ["/no-cellular.bin", "/no-expensive.bin", "/no-constrained.bin"].allSatisfy { stage.requests(to: $0).count == 1 } })
    }

    @Test("A corrupt conditions file: the daemon says so in its log and runs on the defaults; bgtransfer conditions warns and writes a good one")
    func corruptConditionsFile() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        try Data("{\"network\": \"moon\"".utf8).write(to: container.layout.deviceConditions)
        _ = try DaemonUnderTest.start(container)
        #expect(container.waitForLog { $0.process == "transferd" && $0.category == "conditions" && $0.message.contains("is corrupt") && $0.message.contains("going on with the defaults") } != nil)
        let shown = try Executable.bgtransfer.run(["conditions"], in: container)
        #expect(shown.status == 0 && shown.stderr.contains("is corrupt") && shown.stdout.contains("network wifi"), "\(shown.stdout) \(shown.stderr)")
        let fixed = try Executable.bgtransfer.run(["conditions", "--network", "cellular"], in: container)
        #expect(fixed.status == 0)
        #expect((try? DeviceConditions.load(from: container.layout))?.network == .cellular)
        #expect(container.waitForLog { $0.process == "transferd" && $0.message == "now network cellular, expensive off, constrained off, power charging, low power mode off" } != nil)
    }

    @Test("host-app download --begin-after holds the request until then; nobody attached, it goes on as created (S5, S5.1)")
    func beginAfterHoldsTheRequest() throws {
        let stage = try Stage(paths: ["/dated.bin"])
        try stage.run(.hostApp, ["download", stage.url("/dated.bin"), "--begin-after", "2", "--description", "dated"])
        let task = try #require(stage.task(in: Self.hostSession, url: "/dated.bin"))
        #expect(task.taskDescription == "dated")
        let begin = try #require(task.earliestBeginDate)
        #expect(begin.timeIntervalSince(task.createdAt) >= 1.9)
        #expect(stage.waiting(in: Self.hostSession, url: "/dated.bin")?.hasPrefix("waiting for earliestBeginDate") == true)
        #expect(stage.container.waitForCompletionHandler(of: "host-app") != nil, "done, and the host relaunched for it")
        let sent = try #require(stage.requests(to: "/dated.bin").first?.time)
        #expect(sent >= begin.addingTimeInterval(-0.01), "sent \(sent), not before \(begin)")
    }

    @Test("With transferd --max-transfers 1, downloads queued with --priority start highest first")
    func prioritiesBehindTheGlobalLimit() throws {
        let stage = try Stage(paths: ["/low.bin", "/high.bin", "/middle.bin"], daemonArguments: ["--relaunch-delay", "0.1", "--max-transfers", "1"])
        try stage.run(.bgtransfer, ["conditions", "--network", "offline"])
        for (path, priority) in [("/low.bin", "0.2"), ("/high.bin", "0.8"), ("/middle.bin", "0.5")] {
            try stage.run(.hostApp, ["download", stage.url(path), "--priority", priority])
        }
        #expect(stage.snapshot().sessions.first?.tasks.map(\.priority) == [0.2, 0.8, 0.5])
        try stage.run(.bgtransfer, ["conditions", "--network", "wifi"])
        #expect(waitUntil { stage.server.requests.count == 3 })
        #expect(stage.server.requests.map(\.path) == ["/high.bin", "/middle.bin", "/low.bin"])
    }

    @Test("The resume rate limiter: the delay doubles with each background relaunch, tasks the app creates in the background wait it out, the user's launch resets it (S6.5)")
    func rateLimiterDoublesAndResets() throws {
        let stage = try Stage(paths: ["/first.bin", "/queued.bin"], daemonArguments: ["--relaunch-delay", "1"])
        try stage.run(.hostApp, ["enqueue", stage.url("/queued.bin")])
        try stage.run(.fetchExtension, ["download", stage.url("/first.bin")])
        #expect(waitUntil(timeout: 30) { stage.completionHandlerCalls(of: "host-app") == 1 }, "relaunched for the extension's download")
        #expect(stage.hostRelaunchDelay() == 1, "after one background relaunch: the starting delay")

        // Launched in the background, the host started the next download of its queue.
        let queued = try #require(stage.task(in: Self.hostSession, url: "/queued.bin"))
        #expect(queued.createdInBackground && queued.requirements.isDiscretionary)
        let limitedUntil = try #require(queued.rateLimitedUntil)
        #expect(limitedUntil.timeIntervalSince(queued.createdAt) >= 0.99, "waits out the current delay")
        #expect(stage.waiting(in: Self.hostSession, url: "/queued.bin")?.hasPrefix("created in the background: waiting out the resume rate limiter") == true)
        #expect(waitUntil { stage.requests(to: "/queued.bin").count == 1 })
        let sent = try #require(stage.requests(to: "/queued.bin").first?.time)
        #expect(sent >= limitedUntil.addingTimeInterval(-0.01), "sent \(sent), not before \(limitedUntil)")

        #expect(waitUntil(timeout: 30) { stage.completionHandlerCalls(of: "host-app") == 2 }, "relaunched again for the queued download")
        #expect(stage.hostRelaunchDelay() == 2, "the delay doubled")

        // The user launches the app, once the relaunched one has let the session go (iOS
        // would bring that one forward; a second copy would get -996).
        try #require(stage.container.waitUntilSessionIsFree(Self.hostSession), "the relaunched host still holds its session")
        try stage.run(.hostApp, [])
        #expect(stage.hostRelaunchDelay() == nil, "a user launch starts the limiter over")
    }

    @Test("A quiet period of twice the delay resets the resume rate limiter; relaunches in quick succession double it (S6.5)")
    func rateLimiterResetsAfterQuiet() throws {
        // Each download takes a quarter of a second, so that the extension that starts it has
        // exited when it ends and the event goes to a relaunched host (under CI load a faster
        // one ended while the extension still held the session, which took the event itself).
        let stage = try Stage(paths: ["/a.bin", "/b.bin", "/c.bin"], daemonArguments: ["--relaunch-delay", "1"], bytesPerSecond: 128 << 10)
        // Each relaunch within the period doubles the delay: 1 s after the first, 2 after the
        // second. (On a loaded machine the daemon has been seen to relaunch the host twice
        // for one download; the rule is checked against the relaunches the log shows.)
        func expectedDelay(relaunches: Int) -> Double { pow(2, Double(max(relaunches, 1) - 1)) }
        try stage.run(.fetchExtension, ["download", stage.url("/a.bin")])
        #expect(waitUntil(timeout: 30) { stage.completionHandlerCalls(of: "host-app") == 1 })
        #expect(stage.hostRelaunchDelay() == expectedDelay(relaunches: stage.hostRelaunches()))
        #expect(stage.hostRelaunches() >= 1)

        try #require(stage.waitUntilRelaunchedHostsExited(), "the host relaunched for /a.bin did not exit")
        try stage.run(.fetchExtension, ["download", stage.url("/b.bin")])
        #expect(waitUntil(timeout: 30) { stage.completionHandlerCalls(of: "host-app") == 2 })
        let beforeQuiet = stage.hostRelaunches()
        #expect(beforeQuiet >= 2)
        #expect(stage.hostRelaunchDelay() == expectedDelay(relaunches: beforeQuiet), "a relaunch within the period doubles the delay")

        // Let twice the delay pass with no relaunch: that is the behaviour under test.
        let quietUntil = try #require(stage.snapshot().apps.first { $0.bundleIdentifier == "com.example.host" }?.lastRelaunch).addingTimeInterval(4.2)
        #expect(waitUntil { Date() > quietUntil })
        try #require(stage.waitUntilRelaunchedHostsExited(), "the host relaunched for /b.bin did not exit")
        try stage.run(.fetchExtension, ["download", stage.url("/c.bin")])
        #expect(waitUntil(timeout: 30) { stage.completionHandlerCalls(of: "host-app") == 3 })
        #expect(stage.hostRelaunchDelay() == expectedDelay(relaunches: stage.hostRelaunches() - beforeQuiet), "after a quiet period the delay starts over")
    }
}
