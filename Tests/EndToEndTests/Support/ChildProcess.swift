import Foundation
import TransferPOSIX

/// A process a test starts with `posix_spawn` (`ProcessSpawner`), not Foundation's `Process`:
/// on this toolchain `Process.run` copies whole `d_name` fields while listing /proc/self/fd,
/// and crashes when one ends a page (swift-corelibs-foundation #5472; seen twice in CI, in the
/// power-cut test, which starts thousands). One thread waits for its exit. Thread-safe.
final class ChildProcess: @unchecked Sendable {
    let pid: Int32
    private let exit = NSCondition()
    private var status: Int32?

    /// Starts `executable`; stdout and stderr are appended to the given files, stdin reads
    /// `input` (or /dev/null), and gets `passing` as descriptors 3, 4, …. It stays in the
    /// test's session and process group.
    init(_ executable: String, arguments: [String], environment: [String: String], stdout: URL, stderr: URL, input: FileDescriptor? = nil, passing: [FileDescriptor] = []) throws {
        pid = try ProcessSpawner.spawn(executable, arguments: arguments, environment: environment, newSession: false, outputPath: stdout.path, errorPath: stderr.path, input: input, passing: passing)
        let waiter = Thread { [self, pid] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            // Exit code, or the number of the signal that ended it (as Foundation's terminationStatus).
            let code = raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
            exit.lock()
            status = code
            exit.broadcast()
            exit.unlock()
        }
        waiter.start()
    }

    var isRunning: Bool { exit.withLock { status == nil } }

    /// The exit code (or ending signal) once it has exited within `timeout`; nil otherwise.
    func waitForExit(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        exit.lock()
        defer { exit.unlock() }
        while status == nil && exit.wait(until: deadline) {}
        return status
    }
}
