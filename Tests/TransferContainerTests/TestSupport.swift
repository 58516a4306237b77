#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
import TransferPOSIX

/// A fresh directory under /tmp for one test; the test removes it with `remove()` (in a `defer`).
struct TemporaryDirectory {
    let url: URL

    init(_ label: String = "tct") throws {
        url = URL(fileURLWithPath: "/tmp/\(label)-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var path: String { url.path }

    func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }

    /// A layout rooted in a `container` folder inside this directory, prepared.
    func preparedLayout() throws -> ContainerLayout {
        let layout = ContainerLayout(root: url.appendingPathComponent("container"))
        try layout.prepare()
        return layout
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Polls `condition` until it holds or `timeout` seconds pass; returns whether it held.
/// The pause between polls is only a polling interval, never the synchronisation itself.
func eventually(timeout: TimeInterval = 10, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try condition()
}

/// The permission bits of a file or directory.
func permissions(_ path: String) -> mode_t? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o777
}

func isDirectory(_ path: String) -> Bool {
    var flag: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &flag) && flag.boolValue
}

/// A real child process (`/usr/bin/flock -F -x PATH sleep 30`) holding an exclusive flock
/// on `path`. `-F` (no fork) makes flock exec `sleep` itself, so that the process we
/// started is the only one holding the lock and SIGKILLing it releases the lock.
/// Ended by its pid with `kill()`.
final class FlockHolder {
    let process = Process()
    let path: String

    init(path: String) throws {
        self.path = path
        process.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        process.arguments = ["-F", "-x", path, "/bin/sleep", "30"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits (with a deadline) until the child holds the lock.
    func waitUntilHeld(timeout: TimeInterval = 10) async -> Bool {
        await eventually(timeout: timeout) { FileLock.isHeld(path) }
    }

    /// A holder that does hold the lock: under a heavily loaded machine a child now and then
    /// fails to start in time; it is ended and another one started (at most three tries).
    /// What the tests check is the lock, not process start-up.
    static func holding(_ path: String) async throws -> FlockHolder {
        var holder = try FlockHolder(path: path)
        for _ in 0..<2 {
            if await holder.waitUntilHeld() { return holder }
            let status = holder.process.isRunning ? "still running" : "exited with status \(holder.process.terminationStatus)"
            print("flock child \(holder.pid) did not take \(path) in time (\(status)); starting another")
            holder.kill()
            holder = try FlockHolder(path: path)
        }
        return holder
    }

    /// SIGKILLs the child if it still runs.
    func kill() {
        if process.isRunning { _ = Glibc.kill(pid, SIGKILL) }
    }

    /// Waits (with a deadline) until the child has exited.
    func waitUntilExited(timeout: TimeInterval = 10) async -> Bool {
        await eventually(timeout: timeout) { !process.isRunning }
    }
}

/// Runs an executable with its stdout sent to a file, waiting for it with a deadline; returns stdout.
func runTool(_ executable: String, _ arguments: [String], in directory: TemporaryDirectory, timeout: TimeInterval = 30) async throws -> String? {
    let output = directory.path("tool-\(UUID().uuidString.prefix(6)).out")
    #expect(FileManager.default.createFile(atPath: output, contents: nil))
    let handle = try #require(FileHandle(forWritingAtPath: output))
    defer { try? handle.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = handle
    process.standardError = FileHandle.nullDevice
    try process.run()
    let finished = await eventually(timeout: timeout) { !process.isRunning }
    if !finished {
        _ = kill(process.processIdentifier, SIGKILL)
        return nil
    }
    guard process.terminationStatus == 0 else { return nil }
    return try String(contentsOfFile: output, encoding: .utf8)
}

// MARK: Sample records

let sampleFamily = try! BundleIdentifier("com.example.host")
let sampleOwner = try! BundleIdentifier("com.example.host.fetch")
let sampleGroup = try! BundleIdentifier("group.com.example.transfers")
let sampleSession = try! SessionIdentifier("com.example.host.fetch.background")

/// A date with a fraction of a second that is exact in binary (so equality is exact).
let exactDate = Date(timeIntervalSince1970: 1_700_000_000.125)

func sampleTask(_ identifier: Int = 1) -> TaskRecord {
    var task = TaskRecord(taskIdentifier: identifier, kind: .download,
                          originalRequest: RequestRecord(url: "http://127.0.0.1:8080/files/\(identifier).bin", httpMethod: "GET",
                                                         headers: [HeaderField(name: "Accept", value: "*/*"), HeaderField(name: "X-Order", value: "2")],
                                                         timeoutInterval: 30),
                          createdAt: exactDate)
    task.currentURL = "http://127.0.0.1:8080/redirected/\(identifier).bin"
    task.taskDescription = "task \(identifier) — ünïcode"
    task.priority = 0.75
    task.earliestBeginDate = exactDate.addingTimeInterval(60.5)
    task.state = .running
    task.countOfBytesReceived = 1234
    task.countOfBytesExpectedToReceive = 5678
    task.validator = Validator(entityTag: "\"abc\"", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT")
    task.response = ResponseRecord(url: "http://127.0.0.1:8080/redirected/\(identifier).bin", statusCode: 200, headers: ["Content-Length": "5678"])
    task.retryCount = 2
    task.lastError = "connection reset"
    return task
}

func sampleEvent(_ number: UInt64 = 1, task: TaskRecord = sampleTask()) -> EventRecord {
    EventRecord(number: number, kind: .taskCompleted, createdAt: exactDate.addingTimeInterval(0.25), task: task,
                downloadedFile: "/tmp/somewhere/\(number).download",
                error: TransferFailure(code: TransferFailure.networkConnectionLost, message: "lost", subject: "http://x/y",
                                       backgroundTaskCancelledReason: 2, resumeData: Data([0, 1, 2, 255])))
}

func sampleSessionRecord() -> SessionRecord {
    var configuration = SessionConfiguration()
    configuration.sharedContainerIdentifier = sampleGroup
    configuration.isDiscretionary = true
    configuration.httpAdditionalHeaders = ["X-Client": "tests"]
    configuration.timeoutIntervalForRequest = 12.5
    var record = SessionRecord(identifier: sampleSession, owner: sampleOwner, family: sampleFamily, configuration: configuration, createdAt: exactDate)
    record.nextTaskIdentifier = 7
    record.nextEventNumber = 3
    return record
}
