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
        _ = Self.exitGuard
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
        guard let (fd, endsLine) = openFile() else { return }
        // A writer killed inside its write() (SIGKILL, or another thread's exit()) leaves a
        // line cut at a page boundary: this line then starts on a line of its own.
        var line = endsLine ? Data() : Data([0x0A])
        line.append(entry.jsonLine)
        line.append(0x0A)
        // O_APPEND makes each line land whole at the end, even with several writers, unless
        // the writer dies inside the write(): exit() waits for it (`exitGuard`).
        Self.writing.lock()
        defer { Self.writing.unlock() }
        try? fd.writeAll(line)
    }

    /// Held around each line's write() in this process. Linux cuts an append at a page
    /// boundary when the writing thread is killed inside it, and exit() on another thread
    /// kills it: an extension that exits as its delegate queue logs tore lines (issue 44).
    private static let writing = NSLock()
    /// Makes exit() wait for a line being written; registered with the first log.
    private static let exitGuard: Void = {
        atexit {
            TransferLog.writing.lock()
            TransferLog.writing.unlock()
        }
    }()

    private static let pid = getpid()
    /// Whether stderr is systemd's journal (`JournalStream`), looked at once.
    private static let stderrIsJournal = JournalStream.isJournal(2)

    /// The log file, kept open between lines, and whether it ends with a whole line (or is
    /// empty); reopened when it was rotated (by this process past the size limit, or by
    /// another: checked every 64 lines and whenever it is gone).
    private func openFile() -> (FileDescriptor, endsLine: Bool)? {
        linesSinceCheck += 1
        guard var fd = descriptor ?? reopen() else { return nil }
        var open = stat()
        if fstat(fd.rawValue, &open) != 0 || open.st_nlink == 0 {
            guard let again = reopen() else { return nil }
            fd = again
        } else if Int64(open.st_size) > Self.maximumSize {
            rename(path, path + ".1")
            guard let again = reopen() else { return nil }
            fd = again
        } else if linesSinceCheck >= 64 {
            linesSinceCheck = 0
            var named = stat()
            if stat(path, &named) != 0 || named.st_ino != open.st_ino || named.st_dev != open.st_dev {
                guard let again = reopen() else { return nil }
                fd = again
            }
        }
        return (fd, Self.endsWithNewline(fd))
    }

    /// Whether the file is empty or its last byte is a newline (unknown: yes).
    private static func endsWithNewline(_ fd: FileDescriptor) -> Bool {
        var open = stat()
        guard fstat(fd.rawValue, &open) == 0, open.st_size > 0 else { return true }
        var last: UInt8 = 0x0A
        let read = withUnsafeMutableBytes(of: &last) { try? fd.read(into: $0, at: Int64(open.st_size) - 1) }
        return read != 1 || last == 0x0A
    }

    private func reopen() -> FileDescriptor? {
        descriptor?.close()
        // Read as well: the last byte says whether the file ends with a whole line.
        descriptor = try? FileDescriptor.open(path, O_RDWR | O_CREAT | O_APPEND)
        linesSinceCheck = 0
        return descriptor
    }

    /// Reads the entries of the log (and its rotated predecessor), oldest first; unreadable
    /// lines are skipped, except for an entry glued to the end of a torn one (`entry(inLine:)`).
    public static func entries(layout: ContainerLayout) -> [LogEntry] {
        var result: [LogEntry] = []
        for path in [layout.logFile.path + ".1", layout.logFile.path] {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            for line in data.split(separator: 0x0A) {
                if let entry = entry(inLine: line) { result.append(entry) }
            }
        }
        return result
    }

    /// The entry one line of the log holds. A line that does not parse may be a torn line (its
    /// writer killed mid-write) with a whole entry glued to its end: the entry that parses from
    /// the first later `{` to the line's end, if any, is that one.
    public static func entry(inLine line: some Collection<UInt8>) -> LogEntry? {
        let bytes = Data(line)
        if let entry = try? RecordCoding.decode(LogEntry.self, from: bytes) { return entry }
        guard !bytes.isEmpty else { return nil }
        var start = bytes.startIndex
        while let brace = bytes[bytes.index(after: start)...].firstIndex(of: UInt8(ascii: "{")) {
            // An entry starts with its first member; the cheap check spares most braces a decode.
            if bytes[brace...].starts(with: Self.entryStart),
               let entry = try? RecordCoding.decode(LogEntry.self, from: Data(bytes[brace...])) {
                return entry
            }
            start = brace
        }
        return nil
    }

    /// How every line `jsonLine` writes begins (sorted keys: `category` first).
    private static let entryStart = Data(#"{"category":"#.utf8)
}
