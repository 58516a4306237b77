import Foundation
import TransferPOSIX

/// A built executable of this package, run as a real process.
struct Executable {
    let name: String
    private let explicitPath: String?

    init(name: String, path: String? = nil) {
        self.name = name
        self.explicitPath = path
    }

    static let transferd = Executable(name: "transferd")
    static let hostApp = Executable(name: "host-app")
    static let fetchExtension = Executable(name: "fetch-extension")
    static let shareExtension = Executable(name: "share-extension")
    static let bgtransfer = Executable(name: "bgtransfer")

    /// Beside the test bundle: SwiftPM builds every product into one folder. The daemon may be
    /// another build (`BGTRANSFER_TEST_TRANSFERD=/path/to/transferd`), to run a test against it.
    var path: String {
        if let explicitPath { return explicitPath }
        if name == "transferd", let other = ProcessInfo.processInfo.environment["BGTRANSFER_TEST_TRANSFERD"], !other.isEmpty { return other }
        let directory = (ProcessSpawner.currentExecutable as NSString).deletingLastPathComponent
        return (directory as NSString).appendingPathComponent(name)
    }

    /// Starts the executable on `container`, with output captured to files.
    func start(_ arguments: [String], in container: TestContainer, environment: [String: String] = [:], passContainer: Bool = true, passing: [FileDescriptor] = []) throws -> RunningProcess {
        let id = UUID().uuidString.prefix(8)
        let stdout = container.parent.appendingPathComponent("\(name)-\(id).out")
        let stderr = container.parent.appendingPathComponent("\(name)-\(id).err")
        let child = try ChildProcess(path, arguments: (passContainer ? ["--container", container.root] : []) + arguments,
                                     environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }, stdout: stdout, stderr: stderr, passing: passing)
        return RunningProcess(child: child, stdoutPath: stdout, stderrPath: stderr, containerRoot: container.root)
    }

    /// Runs to the end (with a deadline) and returns status and output.
    func run(_ arguments: [String], in container: TestContainer, timeout: TimeInterval = 60) throws -> RunningProcess.Outcome {
        let running = try start(arguments, in: container)
        return running.wait(timeout: timeout)
    }
}

/// A process a test started.
final class RunningProcess: @unchecked Sendable {
    let child: ChildProcess
    let stdoutPath: URL
    let stderrPath: URL
    /// Every process a test starts names its container on its command line.
    let containerRoot: String

    init(child: ChildProcess, stdoutPath: URL, stderrPath: URL, containerRoot: String) {
        self.child = child
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
        self.containerRoot = containerRoot
    }

    struct Outcome {
        var status: Int32?
        var stdout: String
        var stderr: String
        var timedOut: Bool { status == nil }
    }

    var pid: Int32 { child.pid }
    var isRunning: Bool { child.isRunning }

    /// Waits for the exit (killing the process at the deadline).
    func wait(timeout: TimeInterval) -> Outcome {
        let status = child.waitForExit(timeout: timeout)
        if status == nil {
            kill()
            _ = child.waitForExit(timeout: 5)
        }
        return Outcome(status: status, stdout: read(stdoutPath), stderr: read(stderrPath))
    }

    /// Signals the process if it is still this one: once it has exited its pid may already
    /// belong to another process, which must not be hit.
    func kill(signal: Int32 = SIGKILL) {
        // Not yet reaped, so the pid is still this process's (a zombie at worst).
        guard child.isRunning, ProcessSpawner.commandLine(of: pid)?.contains(containerRoot) == true else { return }
        sendSignal(pid, signal)
    }

    var stdout: String { read(stdoutPath) }
    var stderr: String { read(stderrPath) }

    private func read(_ url: URL) -> String {
        (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }
}

/// `kill(2)`, under a name that no method shadows.
func sendSignal(_ pid: Int32, _ signal: Int32) {
    _ = kill(pid, signal)
}
