import Foundation
import TransferPOSIX

/// Which process a daemon was: its pid, the boot it ran in and its start time since boot (in
/// clock ticks, `/proc/<pid>/stat`), together naming one process for good, as a pid alone
/// (reused) does not. Each daemon records its own in `Daemon/transferd.run` when it starts,
/// and a crash mark (`CrashGuard`) names it, so the next daemon counts only a mark of the
/// daemon that ran before it and is gone. A plain value; any thread.
struct DaemonRun: Equatable, Sendable {
    var pid: Int32
    var boot: String
    var startTicks: UInt64

    /// This process, or nil where `/proc` cannot tell.
    static func current() -> DaemonRun? { of(pid: getpid()) }

    /// The process `pid` is now, or nil when there is none (a zombie, dead but not yet
    /// reaped, counts as none), or `/proc` cannot tell.
    static func of(pid: Int32) -> DaemonRun? {
        guard let boot = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8),
              let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces and parentheses): state is
        // field 3, the start time field 22.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X", let start = UInt64(fields[19]) else { return nil }
        return DaemonRun(pid: pid, boot: boot.trimmingCharacters(in: .whitespacesAndNewlines), startTicks: start)
    }

    /// "pid boot start", as the run record and crash marks hold it.
    var text: String { "\(pid) \(boot) \(startTicks)" }

    init(pid: Int32, boot: String, startTicks: UInt64) {
        self.pid = pid
        self.boot = boot
        self.startTicks = startTicks
    }

    /// Parses `text`; nil for anything else (the file may hold anything).
    init?(text: Substring) {
        let parts = text.split(separator: " ")
        guard parts.count == 3, let pid = Int32(parts[0]), pid > 0, let start = UInt64(parts[2]),
              parts[1].count == 36, parts[1].allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return nil }
        self.init(pid: pid, boot: String(parts[1]), startTicks: start)
    }

    /// Whether this process still runs.
    var isRunning: Bool { Self.of(pid: pid) == self }

    /// The run recorded at `path` (the last daemon's), or nil.
    static func recorded(at path: String, in root: RootDirectory) -> DaemonRun? {
        guard let data = try? root.read(path, limit: StateFileLimits.run) else { return nil }
        return DaemonRun(text: Substring(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// Records this run at `path`, durably and through `root` (a symlink there is replaced): a crash mark is checked against it after the crash.
    func record(at path: String, in root: RootDirectory) throws(Errno) {
        try root.write(Data((text + "\n").utf8), to: path)
    }
}
