#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferCoding
import TransferContainer
import TransferPOSIX

/// How much a log line matters. `debug` and `info` are written only when asked for
/// (`BGTRANSFER_LOG_LEVEL=debug|info`), as with os_log.
public enum LogLevel: String, Codable, Sendable, Comparable, CaseIterable {
    case debug, info, notice, error, fault

    var rank: Int { Self.allCases.firstIndex(of: self)! }
    public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }
}

/// One structured log line, as written to `<root>/Logs/transfer.log` (one JSON object per line).
public struct LogEntry: Codable, Sendable {
    public var time: Date
    public var process: String
    public var pid: Int32
    public var subsystem: String
    public var category: String
    public var level: LogLevel
    public var message: String
    public var session: String?
    public var task: Int?
    /// The typed fact behind a line about a waiting task (a retry, a pause, a wait for a
    /// slot): what the timeline reads, instead of the message's words.
    public var hold: TaskHold?
    /// The typed fact behind a line about an app's launch or a session's opening (`LogEvent`).
    public var event: LogEvent?

    public init(time: Date, process: String, pid: Int32, subsystem: String, category: String, level: LogLevel, message: String, session: String?, task: Int?, hold: TaskHold? = nil, event: LogEvent? = nil) {
        self.time = time
        self.process = process
        self.pid = pid
        self.subsystem = subsystem
        self.category = category
        self.level = level
        self.message = message
        self.session = session
        self.task = task
        self.hold = hold
        self.event = event
    }

    /// The entry as one line of JSON (sorted keys, ISO 8601 time, no newline), written by
    /// hand with the compact coder's writer: the daemon logs every finished task, and
    /// Foundation's encoder was a fifth of its time with many small downloads. Read like any record.
    public var jsonLine: Data {
        var writer = JSONWriter()
        writer.write("{\"category\":")
        writer.write(string: category)
        if let event, let encoded = try? RecordCoding.encodeCompact(event) {
            writer.write(",\"event\":")
            for byte in encoded { writer.write(byte) }
        }
        if let hold, let encoded = try? RecordCoding.encodeCompact(hold) {
            writer.write(",\"hold\":")
            for byte in encoded { writer.write(byte) }
        }
        writer.write(",\"level\":")
        writer.write(string: level.rawValue)
        writer.write(",\"message\":")
        writer.write(string: message)
        writer.write(",\"pid\":")
        writer.write(integer: pid)
        writer.write(",\"process\":")
        writer.write(string: process)
        if let session {
            writer.write(",\"session\":")
            writer.write(string: session)
        }
        writer.write(",\"subsystem\":")
        writer.write(string: subsystem)
        if let task {
            writer.write(",\"task\":")
            writer.write(integer: task)
        }
        writer.write(",\"time\":")
        writer.write(string: ISO8601Format.string(from: time))
        writer.write(UInt8(ascii: "}"))
        return Data(writer.bytes)
    }
}

/// The os_log of this world: every process (daemon, apps, extensions, the library inside
/// them) appends structured lines to one file in the container. Thread-safe (one lock).
public final class TransferLog: @unchecked Sendable {
    public let process: String
    public let subsystem: String
    private let path: String
    private let minimumLevel: LogLevel
    private let echoLevel: LogLevel?
    private let lock = NSLock()
    /// The open log file (O_APPEND) and when it was last checked against the path.
    private var descriptor: FileDescriptor?
    private var linesSinceCheck = 0
    /// The file is rotated to `.1` past this size.
    public static let maximumSize: Int64 = 16 << 20

    /// - Parameter echoLevel: lines at this level or above also go to stderr (nil: none).
    /// - Parameter minimumLevel: the quietest level written; nil: `BGTRANSFER_LOG_LEVEL`, else notice.
    public init(layout: ContainerLayout, process: String, subsystem: String, echoLevel: LogLevel? = nil, minimumLevel: LogLevel? = nil) {
        self.process = process
        self.subsystem = subsystem
        self.path = layout.logFile.path
        self.echoLevel = echoLevel
        let asked = ProcessInfo.processInfo.environment["BGTRANSFER_LOG_LEVEL"].flatMap(LogLevel.init(rawValue:))
        self.minimumLevel = minimumLevel ?? asked ?? .notice
    }

    public func debug(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil, hold: TaskHold? = nil, event: LogEvent? = nil) {
        write(.debug, category, message, session: session, task: task, hold: hold, event: event)
    }

    public func info(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil, hold: TaskHold? = nil, event: LogEvent? = nil) {
        write(.info, category, message, session: session, task: task, hold: hold, event: event)
    }

    public func notice(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil, hold: TaskHold? = nil, event: LogEvent? = nil) {
        write(.notice, category, message, session: session, task: task, hold: hold, event: event)
    }

    public func error(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil, hold: TaskHold? = nil, event: LogEvent? = nil) {
        write(.error, category, message, session: session, task: task, hold: hold, event: event)
    }

    private func write(_ level: LogLevel, _ category: String, _ message: () -> String, session: String?, task: Int?, hold: TaskHold?, event: LogEvent?) {
        let echo = echoLevel.map { level >= $0 } ?? false
        guard level >= minimumLevel || echo else { return }
        let entry = LogEntry(time: Date(), process: process, pid: Self.pid, subsystem: subsystem, category: category, level: level, message: message(), session: session, task: task, hold: hold, event: event)
        if echo {
            FileHandle.standardError.write(Data(JournalStream.line(entry, forJournal: Self.stderrIsJournal).utf8))
        }
        guard level >= minimumLevel else { return }
        lock.lock()
        defer { lock.unlock() }
        guard let fd = openFile() else { return }
        var line = entry.jsonLine
        line.append(0x0A)
        // O_APPEND makes each line land whole at the end, even with several writers.
        try? fd.writeAll(line)
    }

    private static let pid = getpid()
    /// Whether stderr is systemd's journal (`JournalStream`), looked at once.
    private static let stderrIsJournal = JournalStream.isJournal(2)

    /// The log file, kept open between lines; reopened when it was rotated (by this process
    /// past the size limit, or by another: checked every 64 lines and whenever it is gone).
    private func openFile() -> FileDescriptor? {
        linesSinceCheck += 1
        if let fd = descriptor {
            var open = stat()
            guard fstat(fd.rawValue, &open) == 0 else { return reopen() }
            if Int64(open.st_size) > Self.maximumSize {
                rename(path, path + ".1")
                return reopen()
            }
            if open.st_nlink == 0 { return reopen() }
            if linesSinceCheck >= 64 {
                linesSinceCheck = 0
                var named = stat()
                if stat(path, &named) != 0 || named.st_ino != open.st_ino || named.st_dev != open.st_dev { return reopen() }
            }
            return fd
        }
        return reopen()
    }

    private func reopen() -> FileDescriptor? {
        descriptor?.close()
        descriptor = try? FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND)
        linesSinceCheck = 0
        return descriptor
    }

    /// Reads the entries of the log (and its rotated predecessor), oldest first; unreadable lines are skipped.
    public static func entries(layout: ContainerLayout) -> [LogEntry] {
        var result: [LogEntry] = []
        for path in [layout.logFile.path + ".1", layout.logFile.path] {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            for line in data.split(separator: 0x0A) {
                if let entry = try? RecordCoding.decode(LogEntry.self, from: Data(line)) { result.append(entry) }
            }
        }
        return result
    }
}
