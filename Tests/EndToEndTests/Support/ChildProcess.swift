import Foundation
import TransferPOSIX

/// A process a test starts with `posix_spawn` (`ProcessSpawner`), not Foundation's `Process`:
/// on this toolchain `Process.run` copies whole `d_name` fields while listing /proc/self/fd,
/// and crashes when one ends a page (swift-corelibs-foundation #5472; seen twice in CI, in the
/// power-cut test, which starts thousands). One thread waits for its exit. Thread-safe.
final class ChildProcess: Sendable {
    let pid: Int32
    private let exit: ChildExit

    /// Starts `executable`; stdout and stderr are appended to the given files, stdin reads
    /// `input` (or /dev/null), and gets `passing` as descriptors 3, 4, …. It stays in the
    /// test's session and process group.
    init(_ executable: String, arguments: [String], environment: [String: String], stdout: URL, stderr: URL, input: FileDescriptor? = nil, passing: [FileDescriptor] = []) throws {
        pid = try ProcessSpawner.spawn(executable, arguments: arguments, environment: environment, newSession: false, outputPath: stdout.path, errorPath: stderr.path, input: input, passing: passing)
        exit = ChildExit(pid: pid)
    }

    var isRunning: Bool { exit.isRunning }

    /// The exit code (or ending signal) once it has exited within `timeout`; nil otherwise.
    func waitForExit(timeout: TimeInterval) -> Int32? { exit.wait(timeout: timeout) }
}
