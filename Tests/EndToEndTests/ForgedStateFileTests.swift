import Foundation
import Testing
import ContainerInspection
import TransferLogging

/// Files in `Daemon/` that any program of the user can write, attacked as such a program
/// would (README "Who may do what"): a crash mark the daemon did not write fails no task.
/// Real daemons, restarted by SIGKILL; a real host-app process makes the task.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct ForgedStateFileTests {
    @Test("A crash mark written by another program before each of two daemon restarts, in the old form or naming a made-up daemon, fails no task: the task is still running and no crash is counted")
    func forgedCrashMark() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        var daemon = try DaemonUnderTest.start(container)
        // A task that waits an hour to begin: running, and never transferring in this test.
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/kept", "--begin-after", "3600"], in: container)
        try #require(created.status == 0, "\(created.stderr)")
        let session = try #require(ContainerSnapshot.read(container.layout).sessions.first { $0.tasks.count == 1 })
        let task = try #require(session.tasks.first)
        let bootID = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let marks = [
            "\(session.family)\t\(session.identifier)\t\(task.taskIdentifier)\n",             // the mark as the daemon wrote it before
            "1 \(bootID) 1\t\(session.family)\t\(session.identifier)\t\(task.taskIdentifier)\n", // naming a daemon that never was
        ]
        let markPath = container.layout.daemonDirectory.appendingPathComponent("crashed-on").path
        for mark in marks {
            for restart in 1...2 {
                try Data(mark.utf8).write(to: URL(fileURLWithPath: markPath))
                daemon.process.kill()
                _ = daemon.process.wait(timeout: 10)
                daemon = try DaemonUnderTest.start(container)
                // The new daemon has read (and removed) the mark before it answers.
                #expect(!FileManager.default.fileExists(atPath: markPath), "restart \(restart): the mark was taken")
                let now = ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks).first { $0.taskIdentifier == task.taskIdentifier }
                #expect(now?.state == .running && now?.daemonCrashes == nil, "restart \(restart) with \(mark.debugDescription): \(String(describing: now?.state)), crashes \(String(describing: now?.daemonCrashes))")
            }
        }
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
    }

    @Test("A crash mark forged from Daemon/transferd.run after the daemon is killed, at each of two restarts, as the run record reads or with its seal where the secret goes, fails no task")
    func crashMarkFromRunRecord() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        var daemon = try DaemonUnderTest.start(container)
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/kept", "--begin-after", "3600"],
                                                 in: container)
        try #require(created.status == 0, "\(created.stderr)")
        let session = try #require(ContainerSnapshot.read(container.layout).sessions.first { $0.tasks.count == 1 })
        let task = try #require(session.tasks.first)
        let note = "\(session.family)\t\(session.identifier)\t\(task.taskIdentifier)\n"
        let runPath = container.layout.daemonDirectory.appendingPathComponent("transferd.run").path
        let markPath = container.layout.daemonDirectory.appendingPathComponent("crashed-on").path
        let forgeries: [(String) -> String] = [
            { run in "\(run)\t\(note)" }, // the run record as it is, then the task
            { run in // the record's last word (the seal) where the daemon puts its secret
                let words = run.split(separator: " ")
                return "\(words.dropLast().joined(separator: " "))\t\(words.last ?? "")\t\(note)"
            },
        ]
        for (index, forge) in forgeries.enumerated() {
            for restart in 1...2 {
                let run = try String(contentsOfFile: runPath, encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                daemon.process.kill()
                _ = daemon.process.wait(timeout: 10)
                // Written once the daemon it names is gone, as its crash would have.
                try Data(forge(run).utf8).write(to: URL(fileURLWithPath: markPath))
                daemon = try DaemonUnderTest.start(container)
                let label = "forgery \(index), restart \(restart)"
                #expect(!FileManager.default.fileExists(atPath: markPath), "\(label): the mark was taken")
                let tasks = ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks)
                let now = tasks.first { $0.taskIdentifier == task.taskIdentifier }
                #expect(now?.state == .running && now?.daemonCrashes == nil,
                        "\(label): \(String(describing: now?.state)), \(String(describing: now?.daemonCrashes))")
            }
        }
        let refused = container.logEntries(process: "transferd", category: "daemon")
            .filter { $0.event?.kind == .crashMarkNotCounted }
        #expect(refused.count == 4, "each forgery is logged as not counted: \(refused.map(\.message))")
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
    }
}
