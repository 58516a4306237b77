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
    /// Each directory made is durable when this returns: its parent is synced, since a power
    /// cut otherwise forgets the new name, and with it everything made inside since.
    public static func makeDirectory(_ path: String) throws(Errno) {
        var existing = stat()
        if stat(path, &existing) == 0, existing.st_mode & S_IFMT == S_IFDIR { return } // the usual case: one stat
        var partial = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            let parent = partial.isEmpty ? "/" : partial
            partial += "/" + component
            if mkdir(partial, 0o700) != 0 {
                guard errno == EEXIST else { throw .current("mkdir", path: partial) }
                var st = stat()
                guard stat(partial, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { throw Errno(ENOTDIR, "mkdir", path: partial) }
            } else {
                try syncDirectory(parent)
            }
        }
    }
}

/// JSON encoding and decoding of the container's records, in one place so that every record
/// has the same form: ISO 8601 dates, Base64 data, unescaped slashes. Records written whole
/// (`write`, `bgtransfer inspect`) are pretty-printed with sorted keys by Foundation; journal
/// lines, in-place records and socket frames are compact, members in declaration order, by
/// `CompactJSONEncoder` (`encodeCompact`). Either decoder reads either form.
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

    /// The compact JSON of a message or record, by `CompactJSONEncoder` (about four times as
    /// fast as Foundation's encoder with our records).
    public static func encodeCompact<T: Encodable>(_ value: T) throws -> Data {
        try CompactJSONEncoder().encode(value)
    }

    /// A message or record from JSON in either form, by `CompactJSONDecoder` (two to three
    /// times as fast as Foundation's decoder with our records, and stricter).
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try CompactJSONDecoder().decode(type, from: data)
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

/// ISO 8601 timestamps with milliseconds, UTC (`2026-11-21T14:51:50.705Z`). Written and read
/// by hand for dates from 1970 to 9999 (every record's, and the format style's calendar is
/// the proleptic Gregorian one there); others, and other forms of text, go through
/// Foundation's format style.
public enum ISO8601Format {
    private static let seconds = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!)
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!)

    public static func string(from date: Date) -> String {
        // Whole milliseconds, rounded: the format style truncates, and a binary double just
        // below .123 would read back as .122.
        // A date an app made may be anything (1e300 s, NaN): it is written as the nearest one
        // a record can hold, 0001-01-01 to 9999-12-31, never trapped on.
        let milliseconds = Int64(CheckedNumbers.clamp((date.timeIntervalSince1970 * 1000).rounded(), to: -62_135_596_800_000...253_402_300_799_999))
        let whole = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = Int(milliseconds - whole * 1000)
        let (year, month, day) = civil(days: Int(whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400))
        guard whole >= 0, year <= 9999 else {
            var text = seconds.format(Date(timeIntervalSince1970: TimeInterval(whole)))
            text.removeLast() // "Z"
            return text + String(format: ".%03dZ", fraction)
        }
        let second = Int(whole % 86_400)
        return String(unsafeUninitializedCapacity: 24) { text in
            func put(_ value: Int, digits: Int, at offset: Int, then separator: UInt8) {
                var rest = value
                for index in (offset..<(offset + digits)).reversed() {
                    text[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                text[offset + digits] = separator
            }
            put(year, digits: 4, at: 0, then: UInt8(ascii: "-"))
            put(month, digits: 2, at: 5, then: UInt8(ascii: "-"))
            put(day, digits: 2, at: 8, then: UInt8(ascii: "T"))
            put(second / 3600, digits: 2, at: 11, then: UInt8(ascii: ":"))
            put(second / 60 % 60, digits: 2, at: 14, then: UInt8(ascii: ":"))
            put(second % 60, digits: 2, at: 17, then: UInt8(ascii: "."))
            put(fraction, digits: 3, at: 20, then: UInt8(ascii: "Z"))
            return 24
        }
    }

    public static func date(from text: String) -> Date? {
        if let date = exactDate(from: text) { return date }
        if let date = try? withFraction.parse(text) {
            // Parsing has the same binary rounding: settle on the nearest millisecond.
            return Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
        }
        return try? seconds.parse(text)
    }

    /// A date written as `string(from:)` writes it, from 1970 on; nil for any other text.
    private static func exactDate(from text: String) -> Date? {
        var text = text
        return text.withUTF8 { text -> Date? in
            guard text.count == 24, text[4] == UInt8(ascii: "-"), text[7] == UInt8(ascii: "-"), text[10] == UInt8(ascii: "T"), text[13] == UInt8(ascii: ":"),
                  text[16] == UInt8(ascii: ":"), text[19] == UInt8(ascii: "."), text[23] == UInt8(ascii: "Z") else { return nil }
            func number(_ range: Range<Int>) -> Int? {
                var value = 0
                for index in range {
                    let digit = text[index] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int(digit)
                }
                return value
            }
            guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
                  let minute = number(14..<16), let second = number(17..<19), let milliseconds = number(20..<23),
                  year >= 1970, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
            let days = self.days(year: year, month: month, day: day)
            guard civil(days: days) == (year, month, day) else { return nil } // no 31 June
            let seconds: Int = ((days * 24 + hour) * 60 + minute) * 60 + second
            // As the format style's result is rounded below: the whole number of milliseconds over 1000.
            return Date(timeIntervalSince1970: Double(seconds * 1000 + milliseconds) / 1000)
        }
    }

    /// The proleptic Gregorian date `days` days after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468 // from 0000-03-01
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153 // from March
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, dayOfYear - (153 * shiftedMonth + 2) / 5 + 1)
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (`days_from_civil`).
    private static func days(year: Int, month: Int, day: Int) -> Int {
        let marchYear = month <= 2 ? year - 1 : year
        let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
        let yearOfEra = marchYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        return era * 146_097 + yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear - 719_468
    }
}
