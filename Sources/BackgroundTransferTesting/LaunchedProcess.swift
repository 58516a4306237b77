import TestPeers
import TransferPOSIX

/// A process a test started on a `SimulatedDevice` (an app, an extension, a plain program or
/// the daemon), with its output captured to files. Its exit is reaped by a `ChildExit`, so any
/// thread may ask. Ended by its pid, and only while it is still this process.
public final class LaunchedProcess: Sendable {
    /// Its name (the executable's file name).
    public let name: String
    /// Its process id.
    public let pid: Int32
    /// Where its standard output goes.
    public let outputFile: URL
    /// Where its standard error goes.
    public let errorFile: URL
    /// A word on its command line (its container's path): a pid without it is not this process.
    private let marker: String
    private let exit: ChildExit

    init(executable: URL, arguments: [String], newSession: Bool, outputFile: URL, errorFile: URL, marker: String) throws(TestingFailure) {
        name = executable.lastPathComponent
        self.marker = marker
        self.outputFile = outputFile
        self.errorFile = errorFile
        do {
            pid = try ProcessSpawner.spawn(executable.path, arguments: arguments, newSession: newSession, outputPath: outputFile.path, errorPath: errorFile.path)
        } catch {
            throw TestingFailure(expected: "\(executable.path) starts", happened: "posix_spawn failed: \(error)")
        }
        exit = ChildExit(pid: pid)
    }

    /// Whether it still runs.
    public var isRunning: Bool { exit.isRunning }

    /// What it wrote to standard output so far.
    public var output: String { (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "" }
    /// What it wrote to standard error so far.
    public var errorOutput: String { (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "" }

    /// Waits until it exits and returns its exit status (or the number of the signal that
    /// ended it); throws when it still runs at the deadline (it is left running).
    @discardableResult
    public func exitStatus(within timeout: TimeInterval) async throws -> Int32 {
        let found = try await onOwnThread { self.waitForExit(timeout: timeout) }
        guard let found else {
            throw TestingFailure(expected: "\(name) (pid \(pid)) exits within \(timeout) s", happened: "it still runs; output so far: \(output.suffix(500)) \(errorOutput.suffix(500))")
        }
        return found
    }

    /// Waits until it exits with status 0; throws, with its output, otherwise.
    public func succeeds(within timeout: TimeInterval) async throws {
        let status = try await exitStatus(within: timeout)
        guard status == 0 else {
            throw TestingFailure(expected: "\(name) (pid \(pid)) exits with status 0", happened: "it exited with \(status); output: \(output.suffix(1000)) \(errorOutput.suffix(1000))")
        }
    }

    /// Sends `signal` (SIGKILL unless given): what the system does to a process it ends. Nothing
    /// happens once it has exited, when its pid may already be another process's.
    public func kill(signal: Int32 = SIGKILL) {
        // The command line says whether the pid is still this process's.
        exit.whileNotReaped { pid in
            if ProcessSpawner.commandLine(of: pid)?.contains(marker) == true { _ = Glibc.kill(pid, signal) }
        }
    }

    func waitForExit(timeout: TimeInterval) -> Int32? { exit.wait(timeout: timeout) }
}
