import Foundation
import Testing
import LoopbackServer
import TransferContainer

/// Hostile records: a session whose record cannot be read, and containers moved elsewhere.
@Suite(.timeLimit(.minutes(2)))
struct RecoveryTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("A session whose session.json is corrupt is taken up when its identifier is opened again: its undelivered download reaches the opener with its content, and new tasks and events are numbered after the old ones")
    func corruptRecordTakenUp() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let old = testPayload(size: 256 << 10, seed: 81)
        let new = testPayload(size: 64 << 10, seed: 82)
        var slow = RouteOptions()
        slow.bytesPerSecond = 256 << 10
        server.serve("/old.bin", data: old, options: slow)
        server.serve("/new.bin", data: new)
        try leaveFinishedDownloadUndelivered(server.url(for: "/old.bin"), in: container)

        let directory = container.sessionDirectory(Self.fetchSession)
        let left = try JournalContents.read(session: directory)
        try #require(left.events.keys.sorted() == [1] && left.events[1]?.task.taskIdentifier == 1, "task 1 finished, event 1 undelivered")
        let corrupt = Data("{\"version\":1,\"identifier\":\"com.example.host.fe".utf8)
        try corrupt.write(to: directory.appendingPathComponent("session.json"))

        _ = try DaemonUnderTest.start(container)
        #expect(container.waitForLog { $0.process == "transferd" && $0.category == "store" && $0.message.hasPrefix("cannot load session in") && $0.message.contains(Self.fetchSession) } != nil,
                "skipped at start")
        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/new.bin").absoluteString, "--wait"], in: container)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let started = container.logEntries(process: "fetch-extension", category: "app").filter { $0.message.hasPrefix("started download task") }
        #expect(started.compactMap(\.task) == [1, 2], "the new task is task 2, after the old one: \(started.map(\.message))")

        // The old file reached the opener's delegate, with its content; the new one too.
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("old.bin").path) == SHA256.hexDigest(of: old))
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("new.bin").path) == SHA256.hexDigest(of: new))
        let finished = container.logEntries(process: "fetch-extension", category: "delegate").filter { $0.message.hasPrefix("didFinishDownloadingTo: task") }
        #expect(finished.compactMap(\.task).sorted() == [1, 2], "each download once: \(finished.map(\.message))")

        // On disk: a readable record owned by the opener, the old one kept aside, numbers that went on.
        #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty }, "both events acknowledged")
        let record = try RecordCoding.read(SessionRecord.self, from: directory.appendingPathComponent("session.json").path)
        #expect(record.owner.rawValue == "com.example.host.fetch")
        #expect(record.configuration.sharedContainerIdentifier?.rawValue == "group.com.example.transfers")
        #expect(FileManager.default.contents(atPath: directory.appendingPathComponent("session.json.unreadable").path) == corrupt)
        let journal = try JournalContents.read(session: directory)
        #expect(journal.counters.nextTaskIdentifier == 3 && journal.counters.nextEventNumber == 3, "\(journal.counters)")
        #expect(container.logEntries(process: "transferd", category: "store").contains { $0.message.contains("taken up by com.example.host.fetch") && $0.message.contains("1 undelivered events kept") })
    }
}

/// Makes `url` a finished download of fetch-extension's session that no process has taken:
/// the extension starts it and waits, is stopped (as iOS suspends an app) before it finishes,
/// so its event stays undelivered; then transferd and the extension are killed. Task 1, event 1.
func leaveFinishedDownloadUndelivered(_ url: URL, in container: TestContainer) throws {
    let daemon = try DaemonUnderTest.start(container)
    let holder = try Executable.fetchExtension.start(["download", url.absoluteString, "--wait"], in: container)
    defer {
        holder.kill()
        _ = holder.wait(timeout: 10)
    }
    try #require(container.waitForLog { $0.process == "fetch-extension" && $0.pid == holder.pid && $0.message.hasPrefix("started download task") } != nil, "\(holder.stderr)")
    holder.kill(signal: SIGSTOP)
    try #require(waitUntil { container.pendingEvents(RecoveryTests.fetchSession) == [1] }, "the download finished while its process was stopped")
    daemon.process.kill()
    _ = daemon.process.wait(timeout: 10)
}
