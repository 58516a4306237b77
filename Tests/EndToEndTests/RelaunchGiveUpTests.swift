import Foundation
import Testing
import LoopbackServer
import Digests

/// Relaunches that can never succeed (issue 26, item 5): an app whose executable is gone, or
/// is a program that does not handle `--handle-events-for-background-session`, is tried a
/// bounded number of times, then not again until the user launches it; `inspect --json` says
/// so, an on-demand daemon exits when idle meanwhile, and the events wait for that user launch.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct RelaunchGiveUpTests {
    static let family = "com.example.host"

    /// Runs a shell command line (for files the app runs: a shell writes them, not this
    /// process, whose other threads' children could hold them open for writing, ETXTBSY).
    private func shell(_ command: String, _ arguments: [String], in container: TestContainer) throws {
        let outcome = try Executable(name: "sh", path: "/bin/sh").start(["-c", command, "sh"] + arguments, in: container, passContainer: false).wait(timeout: 30)
        try #require(outcome.status == 0, "sh -c \(command): \(outcome.stderr)")
    }

    /// The host app's entry in `inspect --json`.
    private func hostApp(in container: TestContainer) throws -> (givenUp: Bool, failures: Int, pendingEvents: Int) {
        let inspected = try Executable.bgtransfer.run(["inspect", "--json"], in: container)
        try #require(inspected.status == 0, "\(inspected.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(inspected.stdout.utf8)) as? [String: Any])
        let app = (json["apps"] as? [[String: Any]] ?? []).first { $0["bundleIdentifier"] as? String == Self.family } ?? [:]
        let pending = (json["sessions"] as? [[String: Any]] ?? []).reduce(0) { $0 + (($1["pendingEvents"] as? [Any])?.count ?? 0) }
        return (app["relaunchGivenUp"] as? Bool ?? false, app["failedRelaunches"] as? Int ?? 0, pending)
    }

    /// A copy of host-app, run by the user to start a download that ends after it has exited;
    /// then `breakApp` spoils the copy before the daemon (idle exit after 1 s) launches it for
    /// the event. `attempts` counts the daemon's tries from what they left behind.
    private func givesUp(breakApp: (_ app: String, _ container: TestContainer) throws -> Void, attempts: (TestContainer) -> Int) throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 64 << 10, seed: 5)
        server.serve("/late.bin", data: payload, options: RouteOptions(bytesPerSecond: 32 << 10)) // two seconds
        let folder = container.parent.appendingPathComponent("apps").path
        let app = folder + "/host-app"
        try shell("mkdir -m 755 \"$1\" && cp \"$2\" \"$3\"", [folder, Executable.hostApp.path, app], in: container)
        let daemon = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--exit-when-idle", "1"])

        let created = try Executable(name: "host-app", path: app).start(["download", server.url(for: "/late.bin").absoluteString], in: container).wait(timeout: 30)
        try #require(created.status == 0, "\(created.stderr)")
        try breakApp(app, container)

        // Tried a bounded number of times, then given up on; the daemon, idle, exits.
        let exited = daemon.process.wait(timeout: 30)
        #expect(exited.status == 0, "the daemon exits when idle, its only events held for the user: \(exited.timedOut ? "still running" : exited.stderr)")
        let state = try hostApp(in: container)
        #expect(state.givenUp && state.failures == 3 && state.pendingEvents == 1, "inspect --json: \(state)")
        #expect(attempts(container) == 3, "three tries")
        #expect(container.logEntries(process: "transferd").filter(\.isRelaunchGivenUp).count == 1, "said once")

        // The user launches the app (restored): the events are delivered, relaunching is on again.
        try shell("rm -f \"$2\" && cp \"$1\" \"$2\"", [Executable.hostApp.path, app], in: container)
        _ = try DaemonUnderTest.start(container)
        let launched = try Executable(name: "host-app", path: app).start([], in: container).wait(timeout: 30)
        #expect(launched.status == 0, "\(launched.stderr)")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("late.bin").path) == SHA256.hexDigest(of: payload))
        let after = try hostApp(in: container)
        #expect(!after.givenUp && after.failures == 0 && after.pendingEvents == 0, "inspect --json after the user launch: \(after)")
    }

    @Test("A containing app that prints its usage and exits instead of handling the events is launched three times, then only by the user")
    func programThatCannotHandleEvents() throws {
        var counter = ""
        try givesUp(breakApp: { app, container in
            counter = container.parent.appendingPathComponent("launches").path
            // As a plain program does: usage on stderr, status 0, the events untouched.
            try shell("rm -f \"$1\" && printf '#!/bin/sh\\necho \"$*\" >> %s\\necho \"usage: host-app [--container PATH]\" >&2\\nexit 0\\n' \"$2\" > \"$1\" && chmod 755 \"$1\"",
                      [app, counter], in: container)
        }, attempts: { _ in
            ((try? String(contentsOfFile: counter, encoding: .utf8)) ?? "").split(separator: "\n").count
        })
    }

    @Test("A containing app whose executable is gone is tried three times, then only when the user launches it again")
    func executableGone() throws {
        try givesUp(breakApp: { app, container in
            try shell("rm \"$1\"", [app], in: container)
        }, attempts: { container in
            container.logEntries(process: "transferd").filter(\.isFailedRelaunch).count
        })
    }
}
