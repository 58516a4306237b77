import Foundation
import Testing
import LoopbackServer
import TransferContainer
import TransferPOSIX
import ContainerInspection

/// `bgtransfer` as a well-made Unix tool (issue "command lines a developer trusts"): a
/// container that is not there, an app nobody knows and arguments nobody asked for are
/// errors with a status and a line naming them, never an empty success.
@Suite(.timeLimit(.minutes(20)))
struct ToolCommandLineTests {
    @Test("inspect, log, watch --once, conditions and force-quit on a missing container, or on a file, exit 66 naming the path")
    func missingContainer() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let missing = container.parent.appendingPathComponent("no-such-container").path
        let file = container.parent.appendingPathComponent("a-file").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        for path in [missing, file] {
            for command in [["inspect"], ["inspect", "--json"], ["log"], ["watch", "--once"], ["conditions"], ["force-quit", "com.example.host"]] {
                let outcome = try Executable.bgtransfer.start(["--container", path] + command, in: container, passContainer: false).wait(timeout: 30)
                #expect(outcome.status == 66, "\(command) on \(path): status \(outcome.status ?? -1), \(outcome.stderr)")
                #expect(outcome.stderr.contains(path), "\(command): the error names the path: \(outcome.stderr)")
                #expect(outcome.stdout.isEmpty, "\(command): nothing printed as if it worked: \(outcome.stdout)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: missing), "no command made the missing container")
    }

    @Test("force-quit of an app that never used the container fails naming it; demo refuses arguments it does not take")
    func unknownAppAndExtraArguments() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/x"], in: container)
        try #require(created.status == 0, "\(created.stderr)")

        let nope = try Executable.bgtransfer.run(["force-quit", "com.example.nope"], in: container)
        #expect(nope.status == 1 && nope.stderr.contains("com.example.nope"), "status \(nope.status ?? -1): \(nope.stderr)")
        #expect(ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks).count == 1, "nothing was cancelled")

        let demo = try Executable.bgtransfer.run(["demo", "extra"], in: container)
        #expect(demo.status == 64 && demo.stderr.contains("extra"), "status \(demo.status ?? -1): \(demo.stderr)")
    }

    @Test("inspect says why finished work has not reached the app: the resume rate limiter, with the time of the next launch; holderPID is null, not missing, when nobody holds a session")
    func inspectSaysWhyEventsWait() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/one.bin", data: testPayload(size: 16 << 10, seed: 1))
        server.serve("/two.bin", data: testPayload(size: 16 << 10, seed: 2))
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "60"])
        let session = "com.example.host.fetch.background"

        // The first finished download launches the host at once; it starts the limiter.
        let first = try Executable.fetchExtension.run(["download", server.url(for: "/one.bin").absoluteString], in: container)
        try #require(first.status == 0, "\(first.stderr)")
        #expect(container.waitForCompletionHandler(of: "host-app") != nil)
        // The session's lock, not the host's command line, says whether it is free: a process
        // in its exit has no command line left to read but holds its files a moment longer.
        #expect(waitUntil { container.pendingEvents(session).isEmpty && container.processesNamingContainer(executable: "host-app").isEmpty && container.isSessionFree(session) })

        // The second waits out the limiter's 60 s, and inspect says so.
        let second = try Executable.fetchExtension.run(["download", server.url(for: "/two.bin").absoluteString], in: container)
        try #require(second.status == 0, "\(second.stderr)")
        #expect(waitUntil { !container.pendingEvents(session).isEmpty })
        let snapshot = ContainerSnapshot.read(container.layout)
        let wait = snapshot.sessions.first { $0.identifier == session }?.deliveryWait ?? ""
        #expect(wait.contains("resume rate limiter") && wait.contains("delay 60 s"), "\(wait)")
        let inspected = try Executable.bgtransfer.run(["inspect"], in: container)
        #expect(inspected.status == 0 && inspected.stdout.contains("1 pending: waiting out the resume rate limiter"), "\(inspected.stdout)")
        let json = try Executable.bgtransfer.run(["inspect", "--json"], in: container)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let sessions = object?["sessions"] as? [[String: Any]] ?? []
        #expect(!sessions.isEmpty && sessions.allSatisfy { $0.keys.contains("holderPID") && $0["holderPID"] is NSNull }, "\(sessions.map(\.keys))")
    }

    @Test("log --follow into a file or pipe shows every line so far at once, not when its buffer fills")
    func followFlushes() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        // A user launch, then quiet: nothing new is logged that would push the buffer out.
        let launched = try Executable.hostApp.run([], in: container)
        try #require(launched.status == 0, "\(launched.stderr)")
        let last = try #require(container.logEntries().last { $0.level >= .notice })
        let follower = try Executable.bgtransfer.start(["log", "--follow"], in: container)
        defer { follower.kill() }
        #expect(waitUntil(timeout: 10) { follower.stdout.contains(last.message) }, "the newest line so far appears at once: \(follower.stdout.suffix(300))")
    }

    /// One executable's command line as a test sees it.
    struct Program: Sendable, CustomTestStringConvertible {
        var executable: String
        var subcommands: [String]
        var missing: [String]
        var missingNamed: String
        var testDescription: String { executable }
    }

    @Test("Every executable: --help exits 0 naming the program, its subcommands and --container; --version prints the program and the project's version; an unknown option or a missing argument exits 64 with one line naming it and a pointer to --help", arguments: [
        Program(executable: "transferd", subcommands: ["--relaunch-delay", "--free-space-reserve"], missing: ["--relaunch-delay"], missingNamed: "--relaunch-delay"),
        Program(executable: "bgtransfer", subcommands: ["inspect", "log", "watch", "conditions", "timeline", "demo", "force-quit"], missing: ["force-quit"], missingNamed: "force-quit"),
        Program(executable: "host-app", subcommands: ["download", "enqueue", "remember-password", "--handle-events-for-background-session"], missing: ["download"], missingNamed: "URL"),
        Program(executable: "fetch-extension", subcommands: ["download", "upload"], missing: ["download"], missingNamed: "URL"),
        Program(executable: "share-extension", subcommands: ["download", "upload"], missing: ["upload"], missingNamed: "FILE"),
    ])
    func usageOfEveryExecutable(_ program: Program) throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let executable = Executable(name: program.executable)
        for help in ["--help", "-h"] {
            let outcome = try executable.start([help], in: container, passContainer: false).wait(timeout: 30)
            #expect(outcome.status == 0, "\(help): \(outcome.stderr)")
            #expect(outcome.stdout.contains("USAGE:") && outcome.stdout.contains("\(program.executable) ") && outcome.stdout.contains("--container"), "\(outcome.stdout)")
            for subcommand in program.subcommands { #expect(outcome.stdout.contains(subcommand), "\(help) names \(subcommand): \(outcome.stdout)") }
        }
        let version = try executable.start(["--version"], in: container, passContainer: false).wait(timeout: 30)
        #expect(version.status == 0 && version.stdout == "\(program.executable) \(ProductVersion.current)\n", "--version: \(version.status ?? -1) \(version.stdout) \(version.stderr)")
        for (arguments, named) in [(["--frobnicate"] + (program.executable.hasSuffix("extension") ? ["download", "http://127.0.0.1:9/x"] : []), "--frobnicate"), (program.missing, program.missingNamed)] {
            let outcome = try executable.run(arguments, in: container)
            let lines = outcome.stderr.split(separator: "\n")
            #expect(outcome.status == 64, "\(arguments): status \(outcome.status ?? -1), \(outcome.stderr)")
            #expect(lines.count == 2 && lines[0].hasPrefix("\(program.executable): ") && lines[0].contains(named), "\(arguments): \(outcome.stderr)")
            #expect(lines.last == "See '\(program.executable) --help'.", "\(arguments): \(outcome.stderr)")
        }
    }

    @Test("Without --container the default SharedContainer/ is found upward from the working directory, as git finds .git")
    func defaultContainerFoundUpward() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let top = container.parent.appendingPathComponent("repository")
        let shared = top.appendingPathComponent("SharedContainer")
        try ContainerLayout(root: shared).prepare()
        let deep = top.appendingPathComponent("Sources/deeper")
        try FileManager.default.createDirectory(at: deep, withIntermediateDirectories: true)
        let outcome = try Executable(name: "sh", path: "/bin/sh").start(["-c", "cd '\(deep.path)' && exec '\(Executable.bgtransfer.path)' inspect --json", container.root], in: container,
                                                                       environment: ["BGTRANSFER_CONTAINER": ""], passContainer: false).wait(timeout: 30)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(outcome.stdout.utf8)) as? [String: Any]
        #expect((object?["container"] as? String).map { URL(fileURLWithPath: $0).standardizedFileURL.path } == shared.standardizedFileURL.path, "\(outcome.stdout.prefix(200))")
        #expect(!FileManager.default.fileExists(atPath: deep.appendingPathComponent("SharedContainer").path), "no container was made beside the working directory")
    }

    @Test("bgtransfer demo on a used container says that the event waits out the resume rate limiter, waits it out, and passes")
    func demoSaysWhyItWaits() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        // Long enough that the second demo's event comes within it even on a loaded machine
        // (beside two CPU hogs and three builds, 3 s had passed, and the app was launched at once).
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "15"])
        let first = try Executable.bgtransfer.run(["demo"], in: container, timeout: 90)
        #expect(first.status == 0, "\(first.stdout.suffix(500))")
        let second = try Executable.bgtransfer.run(["demo"], in: container, timeout: 90)
        #expect(second.status == 0, "\(second.stdout.suffix(500))")
        #expect(second.stdout.contains("the event waits: waiting out the resume rate limiter"), "\(second.stdout.suffix(800))")
        // Processes that end normally are no errors in the log (nor in the demo's timeline):
        // two demos give the daemon no error to report at all.
        let errors = container.logEntries(process: "transferd").filter { $0.level >= .error }
        #expect(errors.isEmpty, "\(errors.map(\.message))")
    }

    @Test("watch --once says why a task waits and when it next tries; with nothing running it answers at once")
    func watchSaysWhy() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let idle = try Executable.bgtransfer.run(["watch", "--once"], in: container, timeout: 10)
        #expect(idle.status == 0, "answers with nothing running: \(idle.stderr)")
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/never"], in: container)
        try #require(created.status == 0, "\(created.stderr)")
        #expect(container.waitForRetries(1, of: 1, in: "com.example.host.background") != nil)
        let listed = try Executable.bgtransfer.run(["watch", "--once"], in: container, timeout: 10)
        #expect(listed.status == 0 && listed.stdout.contains("waiting to retry at") && listed.stdout.contains("after:"), "\(listed.stdout)")
    }
}
