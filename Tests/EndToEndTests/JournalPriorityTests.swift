import Foundation
import Testing
import TransferLogging

/// transferd's stderr as systemd's journal reads it (issue 30): with `JOURNAL_STREAM` naming
/// its stderr, each line starts with its syslog priority, so that `journalctl -p` filters;
/// the container's log is the same either way.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct JournalPriorityTests {
    @Test("With JOURNAL_STREAM set to stderr's own device:inode, notice lines start <5> and error lines <3>; the container's log has the same entries, unprefixed")
    func prioritiesOnStderr() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        // The file stderr will be, made first so that its device and inode are known.
        let stderrFile = container.parent.appendingPathComponent("journal.err")
        FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        let attributes = try FileManager.default.attributesOfItem(atPath: stderrFile.path)
        let device = try #require(attributes[.systemNumber] as? Int), inode = try #require(attributes[.systemFileNumber] as? Int)
        let daemon = try ChildProcess(Executable.transferd.path, arguments: ["--container", container.root],
                                      environment: ProcessInfo.processInfo.environment.merging(["JOURNAL_STREAM": "\(device):\(inode)"]) { $1 },
                                      stdout: container.parent.appendingPathComponent("journal.out"), stderr: stderrFile)
        defer { if daemon.isRunning { sendSignal(daemon.pid, SIGKILL) } }
        var stderr: [String] { ((try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }
        try #require(waitUntil { stderr.contains { $0.hasPrefix("<5>transferd[\(daemon.pid)] notice daemon: ") } }, "no <5> notice line: \(stderr)")

        // A frame that is not a request: the daemon logs an error and goes on.
        let client = try RawClient(container)
        defer { client.close() }
        try client.send(body: Data("not a request".utf8))
        #expect(waitUntil { stderr.contains { $0.hasPrefix("<3>transferd[\(daemon.pid)] error ") } }, "no <3> error line: \(stderr)")
        #expect(stderr.allSatisfy { $0.first == "<" }, "every line has its priority: \(stderr)")

        // A line reaches stderr before the container's log: wait for the log's copy.
        var logged: [LogEntry] { container.logEntries(process: "transferd").filter { $0.pid == daemon.pid } }
        #expect(waitUntil { logged.contains { $0.level == .error } }, "no error in the container's log: \(logged.map(\.message))")
        #expect(logged.allSatisfy { !$0.message.hasPrefix("<") }, "the container's log is unchanged: \(logged.map(\.message))")
    }
}
