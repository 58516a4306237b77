#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Crash-safe file writes: temporary file, fsync, rename, fsync of the directory.
///
/// After `write` returns, the new contents survive a `SIGKILL` or a power cut; before it
/// returns, readers see the old contents or none, never a torn file. Stateless.
public enum DurableFile {
    /// Replaces `path` with `data` atomically and durably (mode 0600). With `sync` false the
    /// replacement is still atomic and survives the writer's death, but not a power cut.
    public static func write(_ data: Data, to path: String, syncDirectory: Bool = true, sync: Bool = true) throws(Errno) {
        let directory = (path as NSString).deletingLastPathComponent
        // Unique per write: two threads writing the same record must not share a temporary file.
        let temporary = "\(directory)/.\((path as NSString).lastPathComponent).\(getpid()).\(UUID().uuidString.prefix(8)).tmp"
        let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try fd.writeAll(data)
            if sync { try fd.sync() }
        } catch {
            fd.close()
            unlink(temporary)
            throw error
        }
        fd.close()
        guard rename(temporary, path) == 0 else {
            let error = Errno.current("rename", path: path)
            unlink(temporary)
            throw error
        }
        if syncDirectory && sync { try Self.syncDirectory(directory) }
    }

    /// Makes a rename or unlink inside `directory` durable.
    public static func syncDirectory(_ directory: String) throws(Errno) {
        let fd = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY)
        defer { fd.close() }
        try fd.sync()
    }

    /// Removes a file durably; a missing file is not an error.
    public static func remove(_ path: String, syncDirectory: Bool = true) throws(Errno) {
        if unlink(path) != 0 && errno != ENOENT { throw .current("unlink", path: path) }
        if syncDirectory { try Self.syncDirectory((path as NSString).deletingLastPathComponent) }
    }

    /// Creates a directory and its parents with mode 0700 (the container is private to the user).
    public static func makeDirectory(_ path: String) throws(Errno) {
        var existing = stat()
        if stat(path, &existing) == 0, existing.st_mode & S_IFMT == S_IFDIR { return } // the usual case: one stat
        var partial = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            partial += "/" + component
            if mkdir(partial, 0o700) != 0 {
                guard errno == EEXIST else { throw .current("mkdir", path: partial) }
                var st = stat()
                guard stat(partial, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { throw Errno(ENOTDIR, "mkdir", path: partial) }
            }
        }
    }
}

/// JSON encoding and decoding of the container's records, in one place so that every
/// record on disk has the same, human-readable form (sorted keys, ISO 8601 dates).
public enum RecordCoding {
    public static func encoder(pretty: Bool = true) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601withFraction
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601withFraction
        return decoder
    }

    /// Writes a record durably as JSON.
    public static func write<T: Encodable>(_ value: T, to path: String, syncDirectory: Bool = true, sync: Bool = true) throws {
        try DurableFile.write(encoder().encode(value), to: path, syncDirectory: syncDirectory, sync: sync)
    }

    /// Reads a record; throws `RecordError` naming the path when it is missing, truncated or corrupt.
    public static func read<T: Decodable>(_ type: T.Type, from path: String) throws(RecordError) -> T {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch { throw .unreadable(path: path, reason: "\(error.localizedDescription)") }
        do { return try decoder().decode(T.self, from: data) } catch { throw .corrupt(path: path, reason: "\(error)") }
    }
}

/// A record on disk that cannot be used.
public enum RecordError: Error, CustomStringConvertible, Sendable {
    case unreadable(path: String, reason: String)
    case corrupt(path: String, reason: String)
    case unsupportedVersion(path: String, version: Int)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "record \(path) cannot be read: \(reason)"
        case .corrupt(let path, let reason): "record \(path) is corrupt: \(reason)"
        case .unsupportedVersion(let path, let version): "record \(path) has unsupported version \(version)"
        }
    }
}

extension JSONEncoder.DateEncodingStrategy {
    /// ISO 8601 with milliseconds, so that event times keep their order when read back.
    static var iso8601withFraction: JSONEncoder.DateEncodingStrategy {
        .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601Format.string(from: date))
        }
    }
}

extension JSONDecoder.DateDecodingStrategy {
    static var iso8601withFraction: JSONDecoder.DateDecodingStrategy {
        .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ISO8601Format.date(from: text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO 8601 date: \(text)")
            }
            return date
        }
    }
}

/// ISO 8601 timestamps with milliseconds, UTC (`2026-11-21T14:51:50.705Z`).
public enum ISO8601Format {
    private static let seconds = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!)
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!)

    public static func string(from date: Date) -> String {
        // Whole milliseconds, rounded, written by hand: the format style truncates, and a
        // binary double just below .123 would read back as .122.
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let whole = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = milliseconds - whole * 1000
        var text = seconds.format(Date(timeIntervalSince1970: TimeInterval(whole)))
        text.removeLast() // "Z"
        return text + String(format: ".%03dZ", Int(fraction))
    }

    public static func date(from text: String) -> Date? {
        if let date = try? withFraction.parse(text) {
            // Parsing has the same binary rounding: settle on the nearest millisecond.
            return Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
        }
        return try? seconds.parse(text)
    }
}
