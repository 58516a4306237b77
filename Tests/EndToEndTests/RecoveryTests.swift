import Foundation
import Testing
import LoopbackServer
import TransferContainer
import Digests
import TransferCoding

/// Hostile records: a session whose record cannot be read, and containers moved elsewhere.
@Suite(.timeLimit(.minutes(20)))
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
        let started = container.logEntries(process: "fetch-extension", category: "app").filter(\.isStartedDownload)
        #expect(started.compactMap(\.task) == [1, 2], "the new task is task 2, after the old one: \(started.map(\.message))")

        // The old file reached the opener's delegate, with its content; the new one too.
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("old.bin").path) == SHA256.hexDigest(of: old))
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("new.bin").path) == SHA256.hexDigest(of: new))
        let finished = container.logEntries(process: "fetch-extension", category: "delegate").filter(\.isDidFinishDownloading)
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

    @Test("A container copied elsewhere delivers its own finished file, not the original's: records name files relative to the container")
    func copiedContainer() throws {
        let original = try TestContainer()
        defer { original.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 256 << 10, seed: 83)
        var slow = RouteOptions()
        slow.bytesPerSecond = 256 << 10
        server.serve("/moved.bin", data: payload, options: slow)
        try leaveFinishedDownloadUndelivered(server.url(for: "/moved.bin"), in: original)
        let stored = try #require(try JournalContents.read(session: original.sessionDirectory(Self.fetchSession)).events[1]?.downloadedFile)
        #expect(!stored.hasPrefix("/") && stored.hasPrefix("AppGroups/group.com.example.transfers/"), "relative to the container: \(stored)")

        let copy = try copyContainer(original)
        defer { copy.tearDown() }
        // The original's file now holds other bytes: delivering it would show.
        let originalFile = original.layout.root.appendingPathComponent(stored).path
        let decoy = Data("the original container's file".utf8)
        try decoy.write(to: URL(fileURLWithPath: originalFile))

        _ = try DaemonUnderTest.start(copy)
        let acknowledged = copy.waitForCompletionHandler(of: "host-app")
        try #require(acknowledged != nil, "the host was relaunched in the copy")
        #expect(try SHA256.hexDigest(ofFile: copy.downloads.appendingPathComponent("moved.bin").path) == SHA256.hexDigest(of: payload))
        #expect(!FileManager.default.fileExists(atPath: copy.layout.root.appendingPathComponent(stored).path), "the copy's file was moved away")
        #expect(FileManager.default.contents(atPath: originalFile) == decoy, "the original container was not touched")
        #expect(waitUntil { copy.pendingEvents(Self.fetchSession).isEmpty })
    }

    @Test("Records written with absolute paths: one inside the container is read as before, one outside it is refused with a log line and its file left alone")
    func absolutePathsInOldRecords() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 256 << 10, seed: 84)
        var slow = RouteOptions()
        slow.bytesPerSecond = 256 << 10
        server.serve("/kept.bin", data: payload, options: slow)
        try leaveFinishedDownloadUndelivered(server.url(for: "/kept.bin"), in: container)

        // Rewrite the journal as a daemon before relative paths wrote it, plus an event whose
        // file lies outside the container.
        let directory = container.sessionDirectory(Self.fetchSession)
        var contents = try JournalContents.read(session: directory)
        var inside = try #require(contents.events[1])
        inside.downloadedFile = container.layout.root.appendingPathComponent(inside.downloadedFile!).path
        let outsideFile = container.parent.appendingPathComponent("outside.bin")
        try Data("not the container's".utf8).write(to: outsideFile)
        var outside = inside
        outside.number = 2
        outside.task.taskIdentifier = 2
        outside.downloadedFile = outsideFile.path
        contents.events = [1: inside, 2: outside]
        contents.counters = JournalCounters(nextTaskIdentifier: 3, nextEventNumber: 3)
        var lines = Data()
        for line in contents.compacted {
            lines.append(try RecordCoding.encodeCompact(line))
            lines.append(UInt8(ascii: "\n"))
        }
        try lines.write(to: URL(fileURLWithPath: JournalContents.path(inSession: directory)))

        _ = try DaemonUnderTest.start(container)
        let acknowledged = container.waitForCompletionHandler(of: "host-app")
        try #require(acknowledged != nil, "the host was relaunched")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("kept.bin").path) == SHA256.hexDigest(of: payload), "the absolute path inside the container was used")
        #expect(container.logEntries(process: "transferd", category: "store").contains { $0.message.contains("its finished file \(outsideFile.path) lies outside the container") })
        let delegate = container.logEntries(process: "host-app", category: "delegate").filter { $0.task == 2 }.map(\.message)
        #expect(delegate.count == 1 && delegate.first?.contains("(-3001") == true, "task 2 ends with an error, no file: \(delegate)")
        #expect(FileManager.default.contents(atPath: outsideFile.path) == Data("not the container's".utf8), "the file outside the container was left alone")
    }

    @Test("Record paths: relative inside the root, absolute inside the root read the same, anything outside or climbing refused")
    func recordPaths() {
        let layout = ContainerLayout(root: URL(fileURLWithPath: "/tmp/box/container"))
        #expect(layout.recordPath("/tmp/box/container/AppGroups/g/f.tmp") == "AppGroups/g/f.tmp")
        #expect(layout.recordPath("/tmp/box/containerX/f.tmp") == "/tmp/box/containerX/f.tmp")
        #expect(layout.resolveRecordPath("AppGroups/g/f.tmp") == "/tmp/box/container/AppGroups/g/f.tmp")
        #expect(layout.resolveRecordPath("/tmp/box/container/AppGroups/g/f.tmp") == "/tmp/box/container/AppGroups/g/f.tmp")
        for refused in ["", "/tmp/box/containerX/f.tmp", "/etc/passwd", "../outside", "AppGroups/../../etc/passwd", "/tmp/box/container/../x", "/tmp/box/container/"] {
            #expect(layout.resolveRecordPath(refused) == nil, "\(refused)")
        }
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
    try #require(container.waitForStartedDownload(pid: holder.pid) != nil, "\(holder.stderr)")
    holder.kill(signal: SIGSTOP)
    try #require(waitUntil { container.pendingEvents(RecoveryTests.fetchSession) == [1] }, "the download finished while its process was stopped")
    daemon.process.kill()
    _ = daemon.process.wait(timeout: 10)
}

/// A copy of `original`'s container (its daemon not running) in a new test container.
func copyContainer(_ original: TestContainer) throws -> TestContainer {
    let copy = try TestContainer()
    unlink(original.layout.daemonSocket.path) // a socket cannot be copied; the daemon makes a new one
    try FileManager.default.removeItem(at: copy.layout.root)
    try FileManager.default.copyItem(at: original.layout.root, to: copy.layout.root)
    try? FileManager.default.removeItem(at: copy.layout.logFile) // the copy's log tells of the copy only
    return copy
}
