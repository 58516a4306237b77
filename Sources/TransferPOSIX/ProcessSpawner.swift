#if canImport(Glibc)
import Glibc
#endif
import Foundation
import CPOSIX

/// Starts real processes from executables (`posix_spawn`), as launchd would: the daemon
/// started on demand by a client, the containing app relaunched by the daemon.
public enum ProcessSpawner {
    /// Starts `executable` with `arguments` (not including argv[0]).
    /// - Parameters:
    ///   - newSession: detach into a session of its own (`setsid`), so that it outlives the caller's terminal and process group.
    ///   - outputPath: where stdout and stderr go (appended); `/dev/null` when nil.
    ///   - errorPath: where stderr goes instead, when given (appended).
    ///   - input: the descriptor stdin reads; `/dev/null` when nil.
    ///   - passing: descriptors the process gets as 3, 4, … (as a service manager passes
    ///     listening sockets, `sd_listen_fds(3)`); every other one above 2 is closed.
    public static func spawn(_ executable: String, arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment, newSession: Bool, outputPath: String? = nil,
                             errorPath: String? = nil, input: FileDescriptor? = nil, passing: [FileDescriptor] = []) throws(Errno) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // First, before stdin and the closes below can take their numbers (glibc's dup2 onto
        // the same number clears close-on-exec, as POSIX asks).
        for (offset, fd) in passing.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, fd.rawValue, 3 + Int32(offset))
        }
        let passed = 3..<(3 + Int32(passing.count))
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input.rawValue, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        let output = outputPath ?? "/dev/null"
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        // Descriptors inherited without close-on-exec (a parent's pipe, say) must not live on
        // in a daemon or a relaunched app: whoever waits for that pipe's end would wait forever.
        for fd in inheritableDescriptors() where fd > 2 && !passed.contains(fd) {
            posix_spawn_file_actions_addclose(&actions, fd)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if newSession { flags |= Int32(cposix_spawn_setsid_flag()) }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        let argv = ([executable] + arguments).map { strdup($0) }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") }
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let status = (argv + [nil]).withUnsafeBufferPointer { argvBuffer in
            (envp + [nil]).withUnsafeBufferPointer { envBuffer in
                posix_spawn(&pid, executable, &actions, &attributes, argvBuffer.baseAddress!, envBuffer.baseAddress!)
            }
        }
        guard status == 0 else { throw Errno(status, "posix_spawn", path: executable) }
        return pid
    }

    /// Open descriptors of this process that an exec would pass on.
    private static func inheritableDescriptors() -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap(Int32.init).filter { fd in
            let flags = fcntl(fd, F_GETFD)
            return flags >= 0 && flags & FD_CLOEXEC == 0
        }
    }

    /// Collects exited children without waiting; returns their pids.
    public static func reapExitedChildren() -> [Int32] {
        var reaped: [Int32] = []
        while true {
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            if pid <= 0 { return reaped }
            reaped.append(pid)
        }
    }

    /// The arguments a process was started with (`/proc/<pid>/cmdline`), nil if it is gone.
    public static func commandLine(of pid: Int32) -> [String]? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The path of the running executable.
    public static var currentExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// Whether a process with this pid exists (and is not a zombie we could see).
    public static func isAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        if kill(pid, 0) != 0 && errno == ESRCH { return false }
        if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
           let close = stat.lastIndex(of: ")") {
            let state = stat[stat.index(close, offsetBy: 2)...].prefix(1)
            return state != "Z" && state != "X"
        }
        return true
    }
}
