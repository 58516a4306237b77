#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferCoding

/// How a process's stderr lines look to systemd's journal: when systemd connected stderr to
/// the journal, it says so in `JOURNAL_STREAM` (`<device>:<inode>` of that stream), and each
/// line may start with a `<N>` syslog priority (sd-daemon.h's `SD_ERR` and the rest) that
/// `journalctl -p` filters on. Stateless; any thread.
public enum JournalStream {
    /// The priority a level is logged at: debug 7, info 6, notice 5, error 3, fault 2 (SD_CRIT).
    public static func priority(of level: LogLevel) -> Int {
        switch level {
        case .debug: 7
        case .info: 6
        case .notice: 5
        case .error: 3
        case .fault: 2
        }
    }

    /// Whether descriptor `fd` is the stream `JOURNAL_STREAM` names: a stderr redirected
    /// elsewhere by whoever started the process is not the journal, even with the variable set.
    public static func isJournal(_ fd: Int32, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }

    /// One stderr line for `entry`: for the journal, its priority first and no time (the
    /// journal keeps its own); otherwise the time first, as a terminal reader wants it.
    public static func line(_ entry: LogEntry, forJournal: Bool) -> String {
        let text = "\(entry.process)[\(entry.pid)] \(entry.level.rawValue) \(entry.category): \(entry.message)"
        if forJournal {
            // A message spanning lines would make its later lines look like ones of their own.
            return "<\(priority(of: entry.level))>\(text.replacingOccurrences(of: "\n", with: " "))\n"
        }
        return "\(ISO8601Format.string(from: entry.time)) \(text)\n"
    }
}
