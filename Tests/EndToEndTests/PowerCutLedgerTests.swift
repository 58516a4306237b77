import Foundation
import Testing
import TransferCoding
import TransferContainer

/// The power-cut ledger's reading of journals (no FUSE, no processes).
@Suite struct PowerCutLedgerTests {
    static func line(_ line: JournalLine) throws -> Data {
        try RecordCoding.encodeCompact(line) + Data([0x0A])
    }

    static func event(_ number: UInt64, task: Int) -> JournalLine {
        let request = RequestRecord(url: "http://127.0.0.1/\(task)")
        let record = TaskRecord(taskIdentifier: task, kind: .download, originalRequest: request)
        return .event(EventRecord(number: number, kind: .taskCompleted, task: record))
    }

    @Test("An event an acknowledgedThrough line reaches was delivered; a later one, or one acked before, was not")
    func acknowledgedEvents() throws {
        let lines: [JournalLine] = [Self.event(94, task: 94), .acknowledged(through: 0), Self.event(95, task: 95),
                                    .acknowledged(through: 95), Self.event(96, task: 96)]
        let torn = Data(#"{"acknowledgedThrough":9"#.utf8)
        let journal = try lines.map(Self.line).reduce(Data(), +) + torn
        #expect(PowerCutLedger.acknowledgedTasks(journal: journal) == [94, 95])
    }

    @Test("A task whose event was acknowledged is not unfinished, with no delegate line seen (issue 44)")
    func acknowledgedIsNotUnfinished() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let session = root.appendingPathComponent("Sessions/com.example.host/com.example.host.fetch.background")
        try FileManager.default.createDirectory(at: session, withIntermediateDirectories: true)
        let lines: [JournalLine] = [Self.event(95, task: 95), .acknowledged(through: 95)]
        try lines.map(Self.line).reduce(Data(), +).write(to: session.appendingPathComponent("journal.jsonl"))
        var ledger = PowerCutLedger(containerRoot: root.path)
        ledger.accepted["com.example.host.fetch.background#95"] = .init(name: "d-95-10.bin", kind: .download, round: 0)
        #expect(ledger.unfinishedAccepted == ["com.example.host.fetch.background#95"])
        ledger.noteAcknowledged(root: root)
        #expect(ledger.unfinishedAccepted.isEmpty)
    }
}
