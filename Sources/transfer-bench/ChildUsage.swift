import Foundation
import TransferPOSIX

/// A command run to its end as a child of this process, with what the kernel counted for it:
/// wall time, and from `wait4`'s rusage (the child and nothing else) user and system CPU time
/// to the microsecond, page faults and context switches. Spawned without a new session;
/// killed by its pid when it outlives the timeout. Its exit is awaited on a pidfd, so the wall
/// time ends when the child does, not at the next turn of a polling loop.
struct ChildUsage {
    var seconds: Double
    var userSeconds: Double
    var systemSeconds: Double
    var cpuSeconds: Double { userSeconds + systemSeconds }
    /// Minor page faults (pages mapped or copied without reading the disk).
    var pageFaults: Int
    /// Times the child gave up the CPU to wait (for the daemon's reply, a sync).
    var voluntarySwitches: Int

    /// Runs `executable` (a full path) with `arguments`, output to `outputPath` (or nowhere);
    /// a status other than 0 is an error.
    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval, outputPath: String? = nil) throws -> ChildUsage {
        let start = monotonicNow()
        let pid = try ProcessSpawner.spawn(executable, arguments: arguments, newSession: false, outputPath: outputPath)
        let handle = try? ProcessHandle.open(pid: pid) // our child, not yet reaped: it cannot be another's number
        defer { handle?.close() }
        var status: Int32 = 0
        var usage = rusage()
        let deadline = start + timeout
        while true {
            let exited = handle?.waitForExit(within: deadline - monotonicNow()) ?? true
            let waited = exited ? wait4(pid, &status, handle == nil ? WNOHANG : 0, &usage) : 0
            if waited == pid { break }
            if waited < 0 && errno != EINTR { throw BenchError("wait4 for \((executable as NSString).lastPathComponent): errno \(errno)") }
            if monotonicNow() > deadline {
                kill(pid, SIGKILL)
                reap(pid)
                throw BenchError("\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) did not finish within \(Int(timeout)) s; killed")
            }
            if handle == nil { usleep(1_000) } // no pidfds (before Linux 5.3): look again
        }
        let seconds = monotonicNow() - start
        // WIFEXITED and WEXITSTATUS by hand (Glibc's macros are not imported).
        let exited = status & 0x7f == 0
        guard exited, (status >> 8) & 0xff == 0 else {
            throw BenchError("\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) ended with wait status \(status)")
        }
        return ChildUsage(seconds: seconds, userSeconds: usage.ru_utime.seconds, systemSeconds: usage.ru_stime.seconds,
                          pageFaults: usage.ru_minflt, voluntarySwitches: usage.ru_nvcsw)
    }

    /// Where `name` is on PATH.
    static func which(_ name: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw BenchError("\(name) is not on PATH")
    }
}

/// CPU time a running process has used so far, all its threads, from `/proc/PID/stat`
/// (utime and stime, in clock ticks: 10 ms each here).
struct ProcessCPU {
    var userSeconds: Double
    var systemSeconds: Double
    var cpuSeconds: Double { userSeconds + systemSeconds }

    init(pid: Int32) throws {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { throw BenchError("cannot read /proc/\(pid)/stat") }
        // After "pid (comm)": state is field 3, utime field 14, stime field 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { throw BenchError("no utime/stime in /proc/\(pid)/stat") }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        userSeconds = user / ticks
        systemSeconds = system / ticks
    }

    /// This process's own CPU time (every thread), from getrusage, to the microsecond.
    static func ofSelf() -> ProcessCPU {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return ProcessCPU(userSeconds: usage.ru_utime.seconds, systemSeconds: usage.ru_stime.seconds)
    }

    private init(userSeconds: Double, systemSeconds: Double) {
        self.userSeconds = userSeconds
        self.systemSeconds = systemSeconds
    }

    static func - (later: ProcessCPU, earlier: ProcessCPU) -> ProcessCPU {
        ProcessCPU(userSeconds: later.userSeconds - earlier.userSeconds, systemSeconds: later.systemSeconds - earlier.systemSeconds)
    }
}

extension timeval {
    var seconds: Double { Double(tv_sec) + Double(tv_usec) / 1e6 }
}
