import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX

/// A fresh container for one test, in a short temporary path (Unix socket paths are short),
/// removed at the end. Also the place the test's processes are tracked, so that every
/// process a test starts is ended by its pid.
final class TestContainer: @unchecked Sendable {
    let parent: URL
    let layout: ContainerLayout

    init() throws {
        _ = Self.leftoversEnded
        let base = URL(fileURLWithPath: "/tmp/bgt-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        parent = base
        layout = ContainerLayout(root: base.appendingPathComponent("container"))
        try layout.prepare()
    }

    var root: String { layout.root.path }

    /// Ends every process the test started or the daemon launched for it, then removes the
    /// container. Only processes whose command line names this container are ended: a pid
    /// remembered from earlier may belong to somebody else by now.
    func tearDown() {
        endProcesses()
        // BGTRANSFER_KEEP_TEST_CONTAINERS=1 keeps them for a look after a failure.
        if ProcessInfo.processInfo.environment["BGTRANSFER_KEEP_TEST_CONTAINERS"] == nil {
            try? FileManager.default.removeItem(at: parent)
        }
    }

    /// SIGKILLs every process whose command line names this container, but `spared`, and
    /// looks again until none is left, waiting on each killed one's pidfd. Looked for again:
    /// a process killed just after it started another (a daemon launching an app, an app
    /// starting a daemon on demand) leaves that one to appear after the first look, and it
    /// would go on in the container (make it again, or meet what comes next there). Killed
    /// processes start nothing, so this ends; the deadline is for one that cannot be killed.
    /// `looksTwice`: a child caught inside its exec shows no command line yet, and names the
    /// container once it runs; only a second look, 0.1 s later, that finds none ends the sweep
    /// (the power cut's, where no process may outlive the power; a test's teardown looks once).
    func endProcesses(sparing spared: Int32? = nil, within seconds: TimeInterval = 10, looksTwice: Bool = false) {
        let deadline = Date().addingTimeInterval(seconds)
        var emptyLooks = 0
        while Date() < deadline {
            let running = processesNamingContainer().filter { $0 != spared }
            if running.isEmpty {
                emptyLooks += 1
                if emptyLooks == (looksTwice ? 2 : 1) { break }
                usleep(100_000)
                continue
            }
            emptyLooks = 0
            let handles = running.compactMap { try? ProcessHandle.open(pid: $0) }
            for pid in running { kill(pid, SIGKILL) }
            for handle in handles {
                _ = handle.waitForExit(within: deadline.timeIntervalSinceNow)
                handle.close()
            }
        }
    }

    /// Every process whose command line names this container (daemons started on demand,
    /// apps the daemon launched), so that none outlives the test.
    func processesNamingContainer(executable: String? = nil) -> [Int32] {
        Self.processes(naming: root, executable: executable)
    }

    private static func processes(naming root: String, executable: String? = nil) -> [Int32] {
        let own = getpid()
        return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { name -> Int32? in
            guard let pid = Int32(name), pid != own, let arguments = ProcessSpawner.commandLine(of: pid), arguments.contains(root) else { return nil }
            if let executable, (arguments.first.map { ($0 as NSString).lastPathComponent } != executable) { return nil }
            return pid
        }
    }

    /// A test process that crashed never tore its containers down, and the daemons it started
    /// run on. The first container of each test process ends those (of test processes that
    /// no longer exist, found by the pid in `/tmp/bgt-<pid>-…`) and removes their containers.
    private static let leftoversEnded: Void = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for name in names where name.hasPrefix("bgt-") {
            let parts = name.split(separator: "-")
            guard parts.count == 3, let pid = Int32(parts[1]), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            let parent = "/tmp/" + name
            for leftover in processes(naming: parent + "/container") { kill(leftover, SIGKILL) }
            if ProcessInfo.processInfo.environment["BGTRANSFER_KEEP_TEST_CONTAINERS"] == nil {
                try? FileManager.default.removeItem(atPath: parent)
            }
        }
    }()

    /// The app group's container.
    var appGroup: URL { layout.appGroup(try! BundleIdentifier("group.com.example.transfers")) }
    var downloads: URL { appGroup.appendingPathComponent("Downloads") }

    func sessionDirectory(_ identifier: String, family: String = "com.example.host") -> URL {
        layout.sessionDirectory(family: try! BundleIdentifier(family), identifier: try! SessionIdentifier(identifier))
    }

    /// Waits until no process holds the session (its lock file, which a process keeps until
    /// its very end, while its command line is gone already): a stand-in started before that
    /// gets -996, "already in use by another process", from a relaunched host still exiting.
    @discardableResult
    func waitUntilSessionIsFree(_ identifier: String, timeout: TimeInterval = 30) -> Bool {
        waitUntil(timeout: timeout) { isSessionFree(identifier) }
    }

    /// Whether no process holds the host family's session `identifier` (its lock file is free).
    func isSessionFree(_ identifier: String) -> Bool {
        !FileLock.isHeld(layout.sessionLock(family: try! BundleIdentifier("com.example.host"), identifier: try! SessionIdentifier(identifier)).path)
    }

    /// The numbers of a session's undelivered events, as its journal on disk has them.
    func pendingEvents(_ identifier: String) -> [UInt64] {
        ((try? JournalContents.read(session: sessionDirectory(identifier)))?.events.keys).map { $0.sorted() } ?? []
    }

    /// A task not yet finished, as its session's journal on disk has it.
    func task(_ taskIdentifier: Int, in identifier: String, family: String = "com.example.host") -> TaskRecord? {
        guard let family = try? BundleIdentifier(family), let identifier = try? SessionIdentifier(identifier) else { return nil }
        return (try? JournalContents.read(session: layout.sessionDirectory(family: family, identifier: identifier)))?.tasks[taskIdentifier]
    }

    /// Waits until the daemon recorded at least `count` retries of a task (its durable
    /// `retryCount`); returns the task as recorded then.
    func waitForRetries(_ count: Int, of taskIdentifier: Int, in identifier: String, family: String = "com.example.host", timeout: TimeInterval = 30) -> TaskRecord? {
        var found: TaskRecord?
        _ = waitUntil(timeout: timeout) {
            found = task(taskIdentifier, in: identifier, family: family).flatMap { $0.retryCount >= count ? $0 : nil }
            return found != nil
        }
        return found
    }

    /// Waits (polling the log, with a deadline) until an entry matches; returns it.
    func waitForLog(timeout: TimeInterval = 30, _ matches: (LogEntry) -> Bool) -> LogEntry? {
        var found: LogEntry?
        _ = waitUntil(timeout: timeout) {
            found = TransferLog.entries(layout: layout).first(where: matches)
            return found != nil
        }
        return found
    }

    func logEntries(process: String? = nil, category: String? = nil) -> [LogEntry] {
        TransferLog.entries(layout: layout).filter { (process == nil || $0.process == process) && (category == nil || $0.category == category) }
    }
}
