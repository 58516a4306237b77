import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer
import ContainerInspection
import Digests

/// Behaviours a deliberate-bug check found unguarded: each test here fails when its
/// behaviour is broken (what breaks it is named in each test's comment).
@Suite(.timeLimit(.minutes(20)))
struct RestartGuardTests {
    static let fetchSession = "com.example.host.fetch.background"

    /// Breaks when the force-quit list is not read back from `Daemon/apps.json` at start.
    @Test("A force quit outlives a restart of transferd: a task of the app's extension that finishes afterwards relaunches nothing until the user launches the app (S4.2)")
    func forceQuitSurvivesDaemonRestart() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/after.bin", data: testPayload(size: 64 << 10, seed: 91))
        let daemon = try DaemonUnderTest.start(container)
        // The user has run the app once (a force quit is of an app the container knows).
        #expect(try Executable.hostApp.run([], in: container).status == 0)

        let quit = try Executable.bgtransfer.run(["force-quit", "com.example.host"], in: container)
        #expect(quit.status == 0, "\(quit.stderr)")
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
        _ = try DaemonUnderTest.start(container)

        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/after.bin").absoluteString], in: container).status == 0)
        #expect(waitUntil { container.pendingEvents(Self.fetchSession) == [1] }, "the extension's task finished")
        // A relaunch would follow at once (the first one is not delayed): a bounded look.
        #expect(container.waitForLog(timeout: 2) { $0.process == "transferd" && $0.launched("com.example.host") != nil } == nil, "the host was relaunched although force-quit")
        #expect(!container.logEntries(process: "host-app").contains { $0.isLaunchedForEvents }, "no host was launched for events")
        #expect(container.pendingEvents(Self.fetchSession) == [1], "the event waits for the user")

        #expect(ContainerSnapshot.read(container.layout).apps.contains { $0.bundleIdentifier == "com.example.host.fetch" && $0.forceQuit }, "inspection shows the family force-quit")

        // The user launches the app: the force quit ends and the event reaches the host. (Not
        // asserted: which host process takes it. The daemon may relaunch the host for the
        // extension's session the moment the user's launch ends the force quit, and the
        // user-launched one then finds that session held, -996: a race of its own.)
        _ = try Executable.hostApp.run([], in: container)
        #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty })
        #expect(container.logEntries(process: "host-app", category: "delegate").contains { $0.session == Self.fetchSession && $0.isDidFinishDownloading(task: 1) })
        #expect(ContainerSnapshot.read(container.layout).apps.allSatisfy { !$0.forceQuit })
    }

    /// Breaks when `SessionCoordinator` takes no file lock. The daemon refuses a second
    /// process itself while the first is attached (so the two-process test in
    /// `CoordinatorTests` passes without the lock); here the first is stopped across a restart
    /// of transferd, so the new daemon has never seen it and only the lock says it holds the
    /// session.
    @Test("The session lock itself: a process that holds a session while transferd restarts keeps it; a second process gets -996 naming the identifier and the holder's pid (S1.5)")
    func lockHeldAcrossDaemonRestart() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var slow = RouteOptions()
        slow.bytesPerSecond = 256 << 10
        server.serve("/slow", data: testPayload(size: 4 << 20), options: slow)
        server.serve("/other", data: Data("other".utf8))
        let daemon = try DaemonUnderTest.start(container)

        let holder = try Executable.fetchExtension.start(["download", server.url(for: "/slow").absoluteString, "--wait"], in: container)
        defer {
            holder.kill()
            _ = holder.wait(timeout: 10)
        }
        try #require(container.waitForStartedDownload(pid: holder.pid) != nil, "\(holder.stderr)")
        holder.kill(signal: SIGSTOP) // suspended, as iOS suspends an app: it keeps its session
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
        _ = try DaemonUnderTest.start(container)

        let second = try Executable.fetchExtension.start(["download", server.url(for: "/other").absoluteString], in: container)
        let outcome = second.wait(timeout: 30)
        #expect(outcome.status == 2, "\(outcome.stdout) \(outcome.stderr)")
        #expect(outcome.stderr.contains(Self.fetchSession), "names the identifier: \(outcome.stderr)")
        #expect(outcome.stderr.contains("pid \(holder.pid)"), "names the holder: \(outcome.stderr)")
        #expect(outcome.stderr.contains("-996"), "\(outcome.stderr)")
        // The daemon never opened the session for the second process, nor took its task.
        #expect(!container.logEntries(process: "transferd").contains { $0.isSessionOpened(by: second.pid) })
        let tasks = try JournalContents.read(session: container.sessionDirectory(Self.fetchSession)).tasks.values
        #expect(!tasks.contains { $0.originalRequest.url.hasSuffix("/other") }, "\(tasks.map(\.originalRequest.url))")
    }
}

extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class LifetimeGuardTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Breaks when the default session leaves the finished file (the partial it was written
    /// to) in place after `didFinishDownloadingTo`, or removes it only later.
    @Test("A default session's file handed to didFinishDownloadingTo is gone once the method returns, unless the delegate moved it (S3.3)")
    func defaultSessionTemporaryFile() throws {
        let keptPayload = testPayload(size: 512 << 10, seed: 92)
        server.serve("/kept.bin", data: keptPayload)
        server.serve("/left.bin", data: testPayload(size: 256 << 10, seed: 93))
        let delegate = TemporaryFileDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let kept = session.downloadTask(with: server.url(for: "/kept.bin"))
        let left = session.downloadTask(with: server.url(for: "/left.bin"))
        let destination = container.parent.appendingPathComponent("moved.bin")
        delegate.move(kept.taskIdentifier, to: destination)
        kept.resume()
        left.resume()
        #expect(delegate.waitForCompletion(of: [kept.taskIdentifier, left.taskIdentifier]))

        let leftFile = try #require(delegate.seen(left.taskIdentifier))
        #expect(leftFile.existedDuringCall)
        #expect(leftFile.existedAfterReturn == false, "the file outlived didFinishDownloadingTo: \(leftFile.location.path)")
        let keptFile = try #require(delegate.seen(kept.taskIdentifier))
        #expect(keptFile.existedDuringCall && keptFile.existedAfterReturn == false)
        #expect(try SHA256.hexDigest(ofFile: destination.path) == SHA256.hexDigest(of: keptPayload), "the moved file stays, whole")
        let cache = container.layout.privateContainer(InProcess.app.bundleIdentifier).appendingPathComponent("Library/Caches/BackgroundTransfer/Foreground")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cache.path)) ?? []).isEmpty, "nothing of either download is left behind")
        session.finishTasksAndInvalidate()
    }

    /// Breaks when a restarted daemon numbers a session's tasks only from the task and event
    /// lines left in its journal (none, once every task ended and was acknowledged and the
    /// journal was compacted), when a compaction leaves out the counters, or when reading the
    /// journal ignores them.
    @Test("Task identifiers go on after transferd restarts once every task finished and was acknowledged: without compaction, after one while the daemon ran, and after one at its start (S7.1)")
    func identifiersAfterRestart() throws {
        server.serve("/tiny", data: Data("t".utf8))
        var daemon = try DaemonUnderTest.start(container)
        let identifier = try SessionIdentifier("numbers")
        let directory = container.layout.sessionDirectory(family: InProcess.family, identifier: identifier)
        let journal = JournalContents.path(inSession: directory)
        let everyEventAcknowledged = { (try? JournalContents.read(session: directory))?.events.isEmpty ?? false }
        var highest = 0

        /// Opens the session, creates `count` downloads, waits until each finished and was
        /// acknowledged, again until `until` holds after a batch; then invalidates the session.
        func runTasks(_ count: Int, until: () -> Bool = { true }) throws {
            let delegate = RecordingDelegate()
            let session = fixture.session("numbers", delegate: delegate)
            var created = 0
            repeat {
                let tasks = (0..<count).map { _ in session.downloadTask(with: server.url(for: "/tiny")) }
                #expect(tasks.allSatisfy { $0.taskIdentifier > highest }, "\(tasks.map(\.taskIdentifier)) after \(highest)")
                tasks.forEach { $0.resume() }
                highest = max(highest, tasks.map(\.taskIdentifier).max() ?? 0)
                created += tasks.count
                let finished = waitUntil(timeout: 60) { delegate.calls.filter { if case .completed(_, nil, 200) = $0 { true } else { false } }.count == created }
                try #require(finished, "\(created) tasks finished")
                try #require(waitUntil { everyEventAcknowledged() }, "every event acknowledged")
            } while !until() && created < 6_000
            session.finishTasksAndInvalidate()
            try #require(delegate.wait { $0 == .invalid(code: nil) })
            try #require(waitUntil { !SessionCoordinator.shared.openIdentifiers.contains(identifier) }, "released once didBecomeInvalid returned (S1.3)")
        }

        func restartDaemon() throws {
            daemon.process.kill()
            _ = daemon.process.wait(timeout: 10)
            daemon = try DaemonUnderTest.start(container)
        }

        /// After a restart, in a new session object (the daemon alone says where numbering
        /// goes on): the next task's identifier is past every earlier one, and the daemon
        /// takes it as a new task.
        func expectNextIdentifier(_ phase: String) throws {
            let delegate = RecordingDelegate()
            let session = fixture.session("numbers", delegate: delegate)
            let next = session.downloadTask(with: server.url(for: "/tiny"))
            #expect(next.taskIdentifier > highest, "\(phase): task \(next.taskIdentifier) after tasks up to \(highest)")
            next.resume()
            #expect(delegate.wait { $0 == .completed(task: next.taskIdentifier, code: nil, status: 200) }, "\(phase): \(delegate.calls)")
            highest = max(highest, next.taskIdentifier)
            try #require(waitUntil { everyEventAcknowledged() })
            session.finishTasksAndInvalidate()
            try #require(delegate.wait { $0 == .invalid(code: nil) })
            try #require(waitUntil { !SessionCoordinator.shared.openIdentifiers.contains(identifier) })
        }

        // 1. A few tasks; the journal still holds every line.
        try runTasks(3)
        try restartDaemon()
        try expectNextIdentifier("no compaction")

        // 2. Enough tasks that the daemon compacts the journal as it runs (it gets shorter).
        var lines = Self.lineCount(journal)
        var compacted = false
        try runTasks(400) {
            let now = Self.lineCount(journal)
            compacted = compacted || now < lines
            lines = now
            return compacted
        }
        try #require(compacted, "the journal was compacted while the daemon ran")
        try restartDaemon()
        try expectNextIdentifier("compacted while running")

        // 3. A journal whose lines are all stale when the daemon starts (acknowledgements said
        //    again): compacted at the start down to its counters, which are then all the next
        //    start has to go on. 4,200 lines: past the floor (4,096) below which a journal is
        //    left as it is.
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
        let through = try JournalContents.read(journal).counters.nextEventNumber - 1
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journal))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(String(repeating: "{\"acknowledgedThrough\":\(through)}\n", count: 4_200).utf8))
        try handle.close()
        daemon = try DaemonUnderTest.start(container)
        try #require(Self.lineCount(journal) <= 1, "compacted at the start to its counters alone")
        try restartDaemon()
        try expectNextIdentifier("compacted at the start")
    }

    /// Breaks when a daemon rewrites a long journal at start that has no stale line (it did,
    /// past 4,096 lines: 100,000 live tasks took two seconds to encode and sync again).
    @Test("A journal of 5,000 live tasks is read at start, not rewritten: the file is the same one, every task is there")
    func longCompactJournalKeptAtStart() throws {
        let identifier = try SessionIdentifier("long")
        let directory = container.layout.sessionDirectory(family: InProcess.family, identifier: identifier)
        var daemon = try DaemonUnderTest.start(container)
        let delegate = RecordingDelegate()
        fixture.session("long", delegate: delegate).finishTasksAndInvalidate() // its record, no task
        try #require(delegate.wait { $0 == .invalid(code: nil) })
        try #require(waitUntil { !SessionCoordinator.shared.openIdentifiers.contains(identifier) })
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)

        let path = JournalContents.path(inSession: directory)
        let journal = try SessionJournal(path: path, contents: JournalContents.read(path))
        for number in 1_000...5_999 {
            try journal.append(.task(TaskRecord(taskIdentifier: number, kind: .download, originalRequest: RequestRecord(url: server.url(for: "/never/\(number)").absoluteString))))
        }
        try journal.commit()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int)

        daemon = try DaemonUnderTest.start(container)
        let reopened = fixture.session("long", delegate: RecordingDelegate())
        let tasks = try #require(allTasks(reopened, timeout: 30))
        #expect(tasks.count == 5_000, "\(tasks.count) tasks")
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int == inode, "the journal was replaced")
        #expect(after.starts(with: before), "the journal's lines were rewritten (\(before.count) → \(after.count) bytes)")
        reopened.invalidateAndCancel()
        _ = daemon
    }

    /// Lines in a journal file.
    private static func lineCount(_ path: String) -> Int {
        ((try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data()).reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
    }
}
}

/// A download delegate that looks at the file handed to `didFinishDownloadingTo` during the
/// call and again in the next delegate call (`didCompleteWithError`, after the method
/// returned), and moves the files it is asked to.
final class TemporaryFileDelegate: URLSessionDownloadDelegate, @unchecked Sendable {
    struct Seen {
        var location: URL
        var existedDuringCall: Bool
        var existedAfterReturn: Bool?
    }

    private let condition = NSCondition()
    private var destinations: [Int: URL] = [:]
    private var files: [Int: Seen] = [:]
    private var completed: Set<Int> = []

    func move(_ task: Int, to destination: URL) {
        condition.lock()
        destinations[task] = destination
        condition.unlock()
    }

    func seen(_ task: Int) -> Seen? {
        condition.lock()
        defer { condition.unlock() }
        return files[task]
    }

    func waitForCompletion(of tasks: Set<Int>, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !tasks.isSubset(of: completed) {
            if !condition.wait(until: deadline) { return tasks.isSubset(of: completed) }
        }
        return true
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let existed = FileManager.default.fileExists(atPath: location.path)
        condition.lock()
        files[downloadTask.taskIdentifier] = Seen(location: location, existedDuringCall: existed)
        let destination = destinations[downloadTask.taskIdentifier]
        condition.unlock()
        if let destination { try? FileManager.default.moveItem(at: location, to: destination) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        condition.lock()
        if let location = files[task.taskIdentifier]?.location {
            files[task.taskIdentifier]?.existedAfterReturn = FileManager.default.fileExists(atPath: location.path)
        }
        completed.insert(task.taskIdentifier)
        condition.broadcast()
        condition.unlock()
    }
}
