#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferCoding
import TransferPOSIX

/// One line of a session's journal (`Sessions/<family>/<identifier>/journal.jsonl`): a task
/// created or changed, an event written (which ends its task), events acknowledged, or the
/// session's counters. Exactly one field is set; the line is compact JSON
/// (`RecordCoding.encodeCompact`: members in declaration order; lines written before it
/// have sorted keys, and read the same).
public struct JournalLine: Codable, Sendable, Equatable {
    public var task: TaskRecord?
    public var event: EventRecord?
    /// Every event up to this number was delivered and is forgotten.
    public var acknowledgedThrough: UInt64?
    /// Written first by a compaction, so that numbers never go back.
    public var counters: JournalCounters?

    public static func task(_ task: TaskRecord) -> JournalLine { JournalLine(task: task) }
    public static func event(_ event: EventRecord) -> JournalLine { JournalLine(event: event) }
    public static func acknowledged(through number: UInt64) -> JournalLine { JournalLine(acknowledgedThrough: number) }
    public static func counters(_ counters: JournalCounters) -> JournalLine { JournalLine(counters: counters) }
}

/// The next task identifier and event number of a session.
public struct JournalCounters: Codable, Sendable, Equatable {
    public var nextTaskIdentifier: Int
    public var nextEventNumber: UInt64

    public init(nextTaskIdentifier: Int, nextEventNumber: UInt64) {
        self.nextTaskIdentifier = nextTaskIdentifier
        self.nextEventNumber = nextEventNumber
    }
}

/// A session's journal replayed: its unfinished tasks (the last line about each wins), its
/// undelivered events, its counters, and the lines that could not be used. Read by the
/// daemon when it loads a session and by `bgtransfer inspect`. A value; no shared state.
public struct JournalContents: Sendable {
    public var tasks: [Int: TaskRecord] = [:]
    public var events: [UInt64: EventRecord] = [:]
    public var counters = JournalCounters(nextTaskIdentifier: 1, nextEventNumber: 1)
    /// Lines that cannot be used (corrupt, or written by a newer daemon), 1-based.
    public var unreadable: [(line: Int, reason: String, text: Data)] = []
    /// Lines read, usable or not.
    public var lineCount = 0
    /// Bytes up to the end of the last whole line; a torn last line (a writer killed
    /// mid-append, before anyone was told of it) lies beyond and is not part of the journal.
    public var wholeLength = 0
    public var hasTornTail: Bool { tornTailLength > 0 }
    public var tornTailLength = 0

    public init() {}

    /// The journal of the session whose folder is `directory`.
    public static func path(inSession directory: URL) -> String {
        directory.appendingPathComponent("journal.jsonl").path
    }

    /// Reads the journal of the session whose folder is `directory`.
    public static func read(session directory: URL) throws(RecordError) -> JournalContents {
        try read(path(inSession: directory))
    }

    /// Whether the journal of the session whose folder is `directory` holds an event its
    /// client has not acknowledged. A journal that cannot be read holds none as far as this
    /// says (for callers that only wait for delivery; the daemon reports unreadable ones).
    public static func hasUndeliveredEvents(session directory: URL) -> Bool {
        !((try? read(session: directory))?.events.isEmpty ?? true)
    }

    /// Reads `path`; a missing file is an empty journal.
    public static func read(_ path: String) throws(RecordError) -> JournalContents {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return JournalContents()
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        return JournalContents(parsing: data)
    }

    public init(parsing data: Data) {
        let lines = Self.lineRanges(of: data)
        lineCount = lines.count
        wholeLength = (lines.last?.upperBound).map { $0 + 1 - data.startIndex } ?? 0
        tornTailLength = data.count - wholeLength
        // Most lines are tasks, and a dictionary grown line by line moves every record at
        // each doubling.
        tasks.reserveCapacity(lineCount)
        // Decoding and checking are most of reading a long journal (a daemon's start-up):
        // lines are decoded and checked on every core, then replayed here in order, as one
        // reader would. The replay moves each record out of the array rather than copying it
        // (a task record is some twenty strings and optionals to retain and release).
        var parts = Self.decode(lines, of: data)
        var index = 0
        for number in parts.indices {
            var part = parts[number]
            parts[number] = [] // `part` is now the only reference: each line is swapped out of it
            for position in part.indices {
                var line = DecodedLine.blank
                swap(&line, &part[position])
                index += 1
                switch consume line {
                case .blank: continue
                case .task(let task): replay(task: task)
                case .line(let journalLine): replay(journalLine)
                case .unreadable(let reason): unreadable.append((index, reason, Data(data[lines[index - 1]])))
                }
            }
        }
    }

    /// Applies one line. Throws, leaving the contents unchanged, for a record of a newer version.
    public mutating func apply(_ line: JournalLine) throws(RecordError) {
        replay(try Self.checked(line))
    }

    /// `line` with every number checked (`CheckedNumbers`): a line out of range is unusable,
    /// never a trap. Depends on nothing read before it, so lines are checked in parallel.
    static func checked(_ line: JournalLine) throws(RecordError) -> JournalLine {
        guard line.task != nil || line.event != nil || line.acknowledgedThrough != nil || line.counters != nil else {
            throw .corrupt(path: "journal", reason: "a line with none of task, event, acknowledgedThrough, counters")
        }
        // Every number is checked before the line changes anything (CheckedNumbers): a line
        // out of range is unusable, never a trap.
        let task = try line.task.map { task throws(RecordError) in
            guard task.version <= TaskRecord.currentVersion else { throw .unsupportedVersion(path: "journal", version: task.version) }
            return try task.checked(in: "journal")
        }
        let event = try line.event.map { event throws(RecordError) in
            guard event.version <= EventRecord.currentVersion else { throw .unsupportedVersion(path: "journal", version: event.version) }
            guard CheckedNumbers.check(event.number, in: CheckedNumbers.eventNumbers) != nil else {
                throw .corrupt(path: "journal", reason: "event number \(event.number) is outside \(CheckedNumbers.eventNumbers)")
            }
            var checked = event
            checked.task = try event.task.checked(in: "journal")
            return checked
        }
        if let through = line.acknowledgedThrough, through > CheckedNumbers.eventNumbers.upperBound {
            throw .corrupt(path: "journal", reason: "acknowledgedThrough \(through) is past the last event number there can be")
        }
        if let given = line.counters {
            guard (1...CheckedNumbers.taskIdentifiers.upperBound + 1).contains(given.nextTaskIdentifier),
                  (1...CheckedNumbers.eventNumbers.upperBound + 1).contains(given.nextEventNumber) else {
                throw .corrupt(path: "journal", reason: "counters \(given.nextTaskIdentifier), \(given.nextEventNumber) are out of range")
            }
        }
        return JournalLine(task: task, event: event, acknowledgedThrough: line.acknowledgedThrough, counters: line.counters)
    }

    /// Applies a line `checked` has passed.
    private mutating func replay(_ line: consuming JournalLine) {
        if let task = line.task.take() { replay(task: task) }
        if let event = line.event.take() {
            tasks.removeValue(forKey: event.task.taskIdentifier)
            counters.nextEventNumber = max(counters.nextEventNumber, event.number + 1)
            counters.nextTaskIdentifier = max(counters.nextTaskIdentifier, event.task.taskIdentifier + 1)
            events[event.number] = event
        }
        if let through = line.acknowledgedThrough {
            events = events.filter { $0.key > through }
            counters.nextEventNumber = max(counters.nextEventNumber, through + 1)
        }
        if let given = line.counters {
            counters.nextTaskIdentifier = max(counters.nextTaskIdentifier, given.nextTaskIdentifier)
            counters.nextEventNumber = max(counters.nextEventNumber, given.nextEventNumber)
        }
    }

    /// Applies a task line `checked` has passed.
    private mutating func replay(task: consuming TaskRecord) {
        counters.nextTaskIdentifier = max(counters.nextTaskIdentifier, task.taskIdentifier + 1)
        tasks[task.taskIdentifier] = task
    }

    /// The fewest lines that say the same: counters, then tasks, then events, in order.
    public var compacted: [JournalLine] {
        [.counters(counters)]
            + tasks.keys.sorted().map { .task(tasks[$0]!) }
            + events.keys.sorted().map { .event(events[$0]!) }
    }
}

/// The writing end of a session's journal: lines are appended to a buffer as the daemon
/// changes tasks and events, and each commit makes every buffered line durable with one
/// write and one `fdatasync` (group commit). The daemon takes the buffer as a `JournalWrite`
/// at the end of a turn of its loop and performs it on its commit thread, before it lets
/// anyone hear of the changes; `commit()` does both at once. Owned by the daemon's event loop.
public final class SessionJournal {
    public let path: String
    private let file: JournalFile
    private var pending = Data()
    private var pendingLines = 0
    /// Lines in the file, committed or not.
    public private(set) var lineCount: Int
    /// Set when a replacement failed: the lines it dropped from the buffer are only in
    /// memory, so the next write must be a whole replacement again.
    public private(set) var needsReplacement = false

    /// Opens (creating) the journal for appending; `contents` is what reading it found, so
    /// that a torn last line is cut off before anything is appended after it.
    public init(path: String, contents: JournalContents) throws(Errno) {
        self.path = path
        let created = access(path, F_OK) != 0
        let descriptor = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND)
        defer { descriptor.close() }
        file = JournalFile(path: path)
        lineCount = contents.lineCount
        if contents.hasTornTail {
            try descriptor.truncate(to: Int64(contents.wholeLength))
            try descriptor.sync()
        }
        if created { try DurableFile.syncDirectory((path as NSString).deletingLastPathComponent) }
    }

    /// Buffers a line; durable after the next commit.
    public func append(_ line: JournalLine) throws {
        append(encodedLine: try RecordCoding.encodeCompact(line))
    }

    /// Buffers a line already encoded (`EncodedEvent.journalLine`).
    public func append(encodedLine: Data) {
        pending.append(encodedLine)
        pending.append(UInt8(ascii: "\n"))
        pendingLines += 1
    }

    public var hasPending: Bool { !pending.isEmpty }

    /// The buffered lines, to be appended by whoever commits; the buffer starts over. Nil
    /// when nothing is buffered. Give the write back with `didWrite` or `writeFailed`.
    public func takeWrite() -> JournalWrite? {
        guard !pending.isEmpty else { return nil }
        let write = JournalWrite(file: file, data: pending, lineCount: pendingLines, replacesFile: false)
        pending = Data()
        pendingLines = 0
        return write
    }

    /// A write that replaces the journal with `lines` (a compaction); buffered lines are
    /// dropped, since `lines` already say what they said.
    public func replacement(_ lines: [JournalLine]) throws -> JournalWrite {
        var data = Data()
        for line in lines {
            data.append(try RecordCoding.encodeCompact(line))
            data.append(UInt8(ascii: "\n"))
        }
        pending = Data()
        pendingLines = 0
        return JournalWrite(file: file, data: data, lineCount: lines.count, replacesFile: true)
    }

    /// Notes a write taken from this journal as done.
    public func didWrite(_ write: JournalWrite) {
        lineCount = write.replacesFile ? write.lineCount : lineCount + write.lineCount
        if write.replacesFile { needsReplacement = false }
    }

    /// Takes a failed write back: its lines go before those buffered since, for the next try.
    public func writeFailed(_ write: JournalWrite) {
        if write.replacesFile {
            needsReplacement = true
        } else {
            pending = write.data + pending
            pendingLines += write.lineCount
        }
    }

    /// Writes the buffered lines and waits until they are on disk. On failure the lines stay
    /// buffered for the next try.
    public func commit() throws(Errno) {
        guard let write = takeWrite() else { return }
        try perform(write)
    }

    /// Replaces the journal with `lines`, atomically and durably, now.
    public func rewrite(_ lines: [JournalLine]) throws {
        try perform(try replacement(lines))
    }

    private func perform(_ write: JournalWrite) throws(Errno) {
        do throws(Errno) {
            try write.perform()
        } catch {
            writeFailed(write)
            throw error
        }
        didWrite(write)
    }
}

/// Lines taken from a journal's buffer, and how they become durable: appended to the file,
/// or replacing it. Made on the event loop, performed on the thread that commits.
public struct JournalWrite: @unchecked Sendable {
    fileprivate let file: JournalFile
    public let data: Data
    public let lineCount: Int
    public let replacesFile: Bool

    /// Writes the lines and waits until they are on disk. On failure the file is as before.
    public func perform() throws(Errno) {
        if replacesFile { try file.replace(with: data) } else { try file.append(data) }
    }
}

/// A journal's file, opened only while a write is under way: a session holds no descriptor
/// between commits, so the number of sessions (on disk or open) costs the daemon none of its
/// descriptors. Used by one thread at a time: the daemon takes a new `JournalWrite` only
/// once the one before it is done.
final class JournalFile {
    let path: String

    init(path: String) {
        self.path = path
    }

    /// Appends `data` and waits until it is on disk; a short or unsynced write is cut off
    /// again, so no torn line remains. The error names the journal: a full disk is reported
    /// to clients with the path that cannot grow.
    func append(_ data: Data) throws(Errno) {
        // Opened per commit: one open and close beside an fdatasync that costs far more.
        let descriptor = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND)
        defer { descriptor.close() }
        let before: Int64
        do { before = try descriptor.size() } catch { throw naming(error) }
        do throws(Errno) {
            try descriptor.writeAll(data)
            guard fdatasync(descriptor.rawValue) == 0 else { throw Errno.current("fdatasync") }
        } catch {
            _ = ftruncate(descriptor.rawValue, off_t(before))
            throw naming(error)
        }
    }

    /// Replaces the file with `data`, atomically and durably.
    func replace(with data: Data) throws(Errno) {
        do throws(Errno) {
            try DurableFile.write(data, to: path)
        } catch {
            throw naming(error)
        }
    }

    /// `error`, naming the journal (not a temporary file of its replacement).
    private func naming(_ error: Errno) -> Errno {
        Errno(error.code, error.operation, path: path)
    }
}
