#if canImport(Glibc)
import Glibc
#endif
import Foundation

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
    /// The file is rotated to `.1` past this size.
    public static let maximumSize: Int64 = 16 << 20

    /// - Parameter echoLevel: lines at this level or above also go to stderr (nil: none).
    public init(layout: ContainerLayout, process: String, subsystem: String, echoLevel: LogLevel? = nil) {
        self.process = process
        self.subsystem = subsystem
        self.path = layout.logFile.path
        self.echoLevel = echoLevel
        let asked = ProcessInfo.processInfo.environment["BGTRANSFER_LOG_LEVEL"].flatMap(LogLevel.init(rawValue:))
        self.minimumLevel = asked ?? .notice
    }

    public func debug(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil) {
        write(.debug, category, message, session: session, task: task)
    }

    public func info(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil) {
        write(.info, category, message, session: session, task: task)
    }

    public func notice(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil) {
        write(.notice, category, message, session: session, task: task)
    }

    public func error(_ category: String, _ message: @autoclosure () -> String, session: String? = nil, task: Int? = nil) {
        write(.error, category, message, session: session, task: task)
    }

    private func write(_ level: LogLevel, _ category: String, _ message: () -> String, session: String?, task: Int?) {
        let echo = echoLevel.map { level >= $0 } ?? false
        guard level >= minimumLevel || echo else { return }
        let entry = LogEntry(time: Date(), process: process, pid: getpid(), subsystem: subsystem, category: category, level: level, message: message(), session: session, task: task)
        guard var line = try? RecordCoding.encoder(pretty: false).encode(entry) else { return }
        line.append(0x0A)
        if echo {
            let text = "\(ISO8601Format.string(from: entry.time)) \(process)[\(entry.pid)] \(level.rawValue) \(category): \(entry.message)\n"
            FileHandle.standardError.write(Data(text.utf8))
        }
        guard level >= minimumLevel else { return }
        lock.lock()
        defer { lock.unlock() }
        rotateIfNeeded()
        // O_APPEND makes each line land whole at the end, even with several writers.
        guard let fd = try? FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND) else { return }
        try? fd.writeAll(line)
        fd.close()
    }

    private func rotateIfNeeded() {
        var st = stat()
        guard stat(path, &st) == 0, Int64(st.st_size) > Self.maximumSize else { return }
        rename(path, path + ".1")
    }

    /// Reads the entries of the log (and its rotated predecessor), oldest first; unreadable lines are skipped.
    public static func entries(layout: ContainerLayout) -> [LogEntry] {
        let decoder = RecordCoding.decoder()
        var result: [LogEntry] = []
        for path in [layout.logFile.path + ".1", layout.logFile.path] {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            for line in data.split(separator: 0x0A) {
                if let entry = try? decoder.decode(LogEntry.self, from: Data(line)) { result.append(entry) }
            }
        }
        return result
    }
}
