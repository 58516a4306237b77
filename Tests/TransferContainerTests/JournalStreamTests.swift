#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferLogging

/// stderr lines for systemd's journal: `<N>` priorities only when stderr is the stream
/// `JOURNAL_STREAM` names.
@Suite struct JournalStreamTests {
    static let entry = LogEntry(time: Date(timeIntervalSince1970: 0), process: "transferd", pid: 42, subsystem: "com.example.transferd", category: "ipc", level: .error, message: "peer vanished\nmid-frame", session: nil, task: nil)

    @Test("Each level carries sd-daemon.h's priority: debug <7>, info <6>, notice <5>, error <3>, fault <2>; no time, one line")
    func journalLines() {
        let expected: [LogLevel: String] = [.debug: "<7>", .info: "<6>", .notice: "<5>", .error: "<3>", .fault: "<2>"]
        for (level, prefix) in expected {
            var entry = Self.entry
            entry.level = level
            #expect(JournalStream.line(entry, forJournal: true) == "\(prefix)transferd[42] \(level.rawValue) ipc: peer vanished mid-frame\n")
        }
    }

    @Test("Lines for a terminal or a file keep the time first and no priority")
    func terminalLines() {
        #expect(JournalStream.line(Self.entry, forJournal: false) == "1970-01-01T00:00:00.000Z transferd[42] error ipc: peer vanished\nmid-frame\n")
    }

    @Test("JOURNAL_STREAM counts only when it names the descriptor's own device and inode")
    func streamIdentity() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString)").path
        let fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        var st = stat()
        try #require(fstat(fd, &st) == 0)
        #expect(JournalStream.isJournal(fd, environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino)"]))
        #expect(!JournalStream.isJournal(fd, environment: ["JOURNAL_STREAM": "\(st.st_dev):\(st.st_ino + 1)"]), "another stream: stderr was redirected")
        #expect(!JournalStream.isJournal(fd, environment: ["JOURNAL_STREAM": "garbage"]))
        #expect(!JournalStream.isJournal(fd, environment: [:]))
    }
}
