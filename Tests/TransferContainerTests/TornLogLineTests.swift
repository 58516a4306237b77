import Foundation
import Testing
import ContainerInspection
import TransferLogging

/// A writer killed inside its write() leaves the first part of its line (Linux stops an append
/// at a page boundary), and the next writer's line is glued to it (issue 44: an extension
/// exited while its delegate queue logged `didBecomeInvalidWithError`).
@Suite("Torn log lines")
struct TornLogLineTests {
    /// Two lines as the stand-ins write them: the torn one was cut after `session \"`, as in issue 44.
    static func lines() -> (torn: Data, whole: Data) {
        let time = Date(timeIntervalSince1970: 1_700_000_000.125)
        let session = "com.example.host.fetch.background"
        func entry(pid: Int32, _ message: String, task: Int?) -> LogEntry {
            LogEntry(time: time, process: "fetch-extension", pid: pid, subsystem: "com.example.host.fetch",
                     category: "delegate", level: .notice, message: message, session: session, task: task)
        }
        let refused = "background session \"\(session)\" is already in use by another process"
        let dying = entry(pid: 4101, "didBecomeInvalidWithError: \(refused) (-996)", task: nil)
        let line = dying.jsonLine
        let cut = line.range(of: Data(#"session \""#.utf8))!.upperBound
        let completed = entry(pid: 4100, "didCompleteWithError: task 95 nil", task: 95)
        return (line.prefix(upTo: cut), completed.jsonLine)
    }

    @Test("the entry glued to a torn line is read, by entries() and by LogFollower; the torn part is skipped")
    func gluedEntryRecovered() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        var follower = LogFollower(layout: layout, fromStart: true)
        let (torn, whole) = Self.lines()
        let before = LogEntry(time: Date(), process: "transferd", pid: 1, subsystem: "s", category: "c",
                              level: .notice, message: "before", session: nil, task: nil)
        try appendRaw(before.jsonLine + Data([0x0A]) + torn + whole + Data([0x0A]), to: layout.logFile.path)
        #expect(TransferLog.entry(inLine: torn + whole)?.task == 95)
        let read = TransferLog.entries(layout: layout)
        #expect(read.map(\.message) == ["before", "didCompleteWithError: task 95 nil"])
        #expect(read.last?.pid == 4100 && read.last?.session == "com.example.host.fetch.background")
        #expect(follower.next().map(\.message) == ["before", "didCompleteWithError: task 95 nil"])
    }

    @Test("a line that is only torn, or garbage with braces, yields no entry")
    func tornAloneSkipped() {
        let (torn, _) = Self.lines()
        #expect(TransferLog.entry(inLine: torn) == nil)
        #expect(TransferLog.entry(inLine: Data(#"x{"category":{"#.utf8)) == nil)
        #expect(TransferLog.entry(inLine: Data()) == nil)
        #expect(TransferLog.entry(inLine: Data("{".utf8)) == nil)
    }

    @Test("a line written after a torn tail starts on a line of its own")
    func writerStartsAfterTornTail() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let (torn, _) = Self.lines()
        let log = TransferLog(layout: layout, process: "unit-test", subsystem: "s")
        log.notice("c", "first")
        // Another process died inside its write: the file ends in the middle of a line.
        try appendRaw(torn, to: layout.logFile.path)
        log.notice("c", "after the torn line")
        log.notice("c", "and the next")
        let text = try Data(contentsOf: layout.logFile)
        let lines = text.split(separator: 0x0A, omittingEmptySubsequences: false)
        #expect(lines.count == 5 && lines[1] == torn && lines[4].isEmpty, "\(String(decoding: text, as: UTF8.self))")
        #expect(TransferLog.entries(layout: layout).map(\.message) == ["first", "after the torn line", "and the next"])
    }
}
