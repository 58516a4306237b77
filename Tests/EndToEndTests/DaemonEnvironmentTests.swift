import Foundation
import Testing
import LoopbackServer
import Digests

/// The daemon that serves every app takes no orders from the client that happened to start it
/// (issue 26, item 4): an on-demand daemon gets a minimal environment, its test hooks come
/// from its own command line only, and `BGTRANSFER_TRANSFERD` names only a binary nobody but
/// the user could have put there.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct DaemonEnvironmentTests {
    /// The environment of a running process (`/proc/<pid>/environ`), by name.
    private func environment(of pid: Int32) throws -> [String: String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        var result: [String: String] = [:]
        for entry in data.split(separator: 0) {
            let text = String(decoding: entry, as: UTF8.self)
            guard let equals = text.firstIndex(of: "=") else { continue }
            result[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        return result
    }

    @Test("A client with a hostile environment starts a daemon that has none of it: the crash hook is not armed, the log level not changed")
    func hostileClientEnvironment() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var options = RouteOptions()
        options.extraHeaders = [("X-Crash-Daemon", "1")]
        let payload = testPayload(size: 64 << 10, seed: 26)
        server.serve("/armed.bin", data: payload, options: options)
        let hostile = ["BGTRANSFER_FAULT_CRASH_ON_RESPONSE_HEADER": "X-Crash-Daemon", "BGTRANSFER_LOG_LEVEL": "debug",
                       "SSL_CERT_FILE": container.parent.appendingPathComponent("attacker-ca.pem").path]

        // No daemon runs: the host starts one on demand and waits for its download.
        let outcome = try Executable.hostApp.start(["download", server.url(for: "/armed.bin").absoluteString, "--wait"], in: container, environment: hostile).wait(timeout: 60)
        #expect(outcome.status == 0, "the download with the header completes: \(outcome.stderr)")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("armed.bin").path) == SHA256.hexDigest(of: payload))

        let daemons = container.processesNamingContainer(executable: "transferd")
        try #require(daemons.count == 1, "one on-demand daemon: \(daemons)")
        let seen = try environment(of: daemons[0])
        for name in hostile.keys { #expect(seen[name] == nil, "\(name) reached the daemon: \(seen)") }
        #expect(Set(seen.keys).isSubset(of: ["PATH", "HOME", "LANG", "LC_ALL", "TZ"]), "only the minimal environment: \(seen.keys.sorted())")
        #expect(container.crashReports().isEmpty, "the daemon did not trap")
        let started = container.logEntries(process: "transferd").filter { $0.pid == daemons[0] }
        #expect(!started.isEmpty && !started.contains { $0.level == .debug || $0.level == .info }, "the daemon logs at its own level (notice), not the client's")
    }

    @Test("The log level a daemon writes at is its own command line's: transferd --log-level info writes info lines")
    func logLevelFromTheCommandLine() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/small.bin", data: testPayload(size: 4 << 10, seed: 28))
        let daemon = try DaemonUnderTest.start(container, extraArguments: ["--log-level", "info"], environment: ["BGTRANSFER_LOG_LEVEL": "notice"])
        let outcome = try Executable.hostApp.start(["download", server.url(for: "/small.bin").absoluteString, "--wait"], in: container).wait(timeout: 60)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let lines = container.logEntries(process: "transferd").filter { $0.pid == daemon.pid }
        #expect(lines.contains { $0.level == .info } && !lines.contains { $0.level == .debug }, "info lines, and no debug ones: \(lines.map(\.level))")
    }

    @Test("BGTRANSFER_TRANSFERD naming a group-writable copy of transferd is refused with -1004 naming it and why, and nothing is started; a private copy is used")
    func chosenDaemonMustBePrivate() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 32 << 10, seed: 27)
        server.serve("/chosen.bin", data: payload)
        let folder = container.parent.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let copy = folder.appendingPathComponent("transferd")
        try FileManager.default.copyItem(atPath: Executable.transferd.path, toPath: copy.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o775], ofItemAtPath: copy.path)

        let refused = try Executable.hostApp.start(["download", server.url(for: "/chosen.bin").absoluteString, "--wait"], in: container,
                                                   environment: ["BGTRANSFER_TRANSFERD": copy.path]).wait(timeout: 60)
        #expect(refused.status != 0, "no daemon, no download")
        #expect(refused.stderr.contains(copy.path) && refused.stderr.contains("writable by group or others") && refused.stderr.contains("-1004"), "\(refused.stderr)")
        #expect(container.processesNamingContainer(executable: "transferd").isEmpty, "nothing was started")

        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy.path)
        let used = try Executable.hostApp.start(["download", server.url(for: "/chosen.bin").absoluteString, "--wait"], in: container,
                                                environment: ["BGTRANSFER_TRANSFERD": copy.path]).wait(timeout: 60)
        #expect(used.status == 0, "\(used.stderr)")
        let daemons = container.processesNamingContainer(executable: "transferd")
        try #require(daemons.count == 1, "\(daemons)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemons[0])/exe") == copy.path, "the daemon is the chosen copy")
    }
}
