#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
import TransferCoding
import TransferPOSIX

@Suite("SessionJournal")
struct SessionJournalTests {
    @Test("committed lines replay: the last line about a task wins, an event ends its task, an acknowledgement forgets events")
    func replay() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("journal.jsonl").path
        let journal = try SessionJournal(path: path, contents: JournalContents())
        var changed = sampleTask(1)
        changed.state = .running
        for line in [JournalLine.task(sampleTask(1)), .task(sampleTask(2)), .task(changed), .event(sampleEvent(1, task: sampleTask(2))),
                     .task(sampleTask(3)), .event(sampleEvent(2, task: sampleTask(3))), .acknowledged(through: 1)] {
            try journal.append(line)
        }
        #expect(try JournalContents.read(path).tasks.isEmpty, "nothing is on disk before the commit")
        try journal.commit()
        let contents = try JournalContents.read(path)
        #expect(contents.tasks == [1: changed])
        #expect(Array(contents.events.keys) == [2])
        #expect(contents.counters == JournalCounters(nextTaskIdentifier: 4, nextEventNumber: 3))
        #expect(contents.lineCount == 7)
        #expect(contents.unreadable.isEmpty)
        // One line per change, readable with cat.
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.split(separator: "\n").count == 7)
        #expect(text.hasPrefix("{\"task\":{"))
    }

    @Test("a torn last line (a writer killed mid-append) is not part of the journal, and is cut off before the next append")
    func tornTail() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("journal.jsonl").path
        let first = try SessionJournal(path: path, contents: JournalContents())
        try first.append(.task(sampleTask(1)))
        try first.commit()
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        var torn = whole
        torn.append(try RecordCoding.encoder(pretty: false).encode(JournalLine.task(sampleTask(2))).prefix(40))
        try torn.write(to: URL(fileURLWithPath: path))

        let contents = try JournalContents.read(path)
        #expect(contents.hasTornTail)
        #expect(contents.unreadable.isEmpty)
        #expect(Array(contents.tasks.keys) == [1])
        let reopened = try SessionJournal(path: path, contents: contents)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == whole)
        try reopened.append(.task(sampleTask(3)))
        try reopened.commit()
        let after = try JournalContents.read(path)
        #expect(after.tasks.keys.sorted() == [1, 3])
        #expect(after.unreadable.isEmpty && !after.hasTornTail)
    }

    @Test("corrupt lines and records of a newer version are reported with their line numbers; the lines around them load")
    func corruptLines() throws {
        let encoder = RecordCoding.encoder(pretty: false)
        var newer = sampleTask(2)
        newer.version = TaskRecord.currentVersion + 1
        var data = Data()
        for part in [try encoder.encode(JournalLine.task(sampleTask(1))), Data("{\"task\": {\"taskIdentifier\": 2".utf8), Data([0xFF, 0x00, 0x7B]),
                     try encoder.encode(JournalLine.task(newer)), Data(), try encoder.encode(JournalLine.task(sampleTask(3)))] {
            data.append(part)
            data.append(UInt8(ascii: "\n"))
        }
        let contents = JournalContents(parsing: data)
        #expect(contents.tasks.keys.sorted() == [1, 3])
        #expect(contents.unreadable.map(\.line) == [2, 3, 4])
        #expect(contents.unreadable[2].reason.contains("unsupported version"))
    }

    @Test("a long journal (decoded on several threads) reads as one reader would: later lines win, corrupt lines are reported with their numbers")
    func longJournalInOrder() throws {
        let encoder = RecordCoding.encoder(pretty: false)
        var data = Data()
        for identifier in 1...6000 {
            data.append(identifier == 3001 ? Data("{broken".utf8) : try encoder.encode(JournalLine.task(sampleTask(identifier))))
            data.append(UInt8(ascii: "\n"))
        }
        // Task 10 again, later: the later record is the one that stays; then its end.
        var updated = sampleTask(10)
        updated.countOfBytesReceived = 777
        data.append(try encoder.encode(JournalLine.task(updated)))
        data.append(UInt8(ascii: "\n"))
        data.append(try encoder.encode(JournalLine.event(sampleEvent(1, task: sampleTask(20)))))
        data.append(UInt8(ascii: "\n"))
        data.append(Data("{\"task\"".utf8)) // a torn tail
        let contents = JournalContents(parsing: data)
        #expect(contents.lineCount == 6002)
        #expect(contents.unreadable.map(\.line) == [3001])
        #expect(contents.tasks.count == 5998)
        #expect(contents.tasks[10]?.countOfBytesReceived == 777)
        #expect(contents.tasks[20] == nil && contents.events[1] != nil)
        #expect(contents.tornTailLength == 7)
    }

    @Test("a compaction says the same in fewer lines, and numbers never go back")
    func compaction() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("journal.jsonl").path
        let journal = try SessionJournal(path: path, contents: JournalContents())
        for identifier in 1...50 {
            try journal.append(.task(sampleTask(identifier)))
            try journal.append(.event(sampleEvent(UInt64(identifier), task: sampleTask(identifier))))
        }
        try journal.append(.acknowledged(through: 49))
        try journal.commit()
        let before = try JournalContents.read(path)
        try journal.rewrite(before.compacted)
        let after = try JournalContents.read(path)
        #expect(after.lineCount == 2) // counters and event 50
        #expect(after.events.keys.sorted() == [50])
        #expect(after.counters == before.counters)
        #expect(after.counters == JournalCounters(nextTaskIdentifier: 51, nextEventNumber: 51))
        try journal.append(.task(sampleTask(51)))
        try journal.commit()
        #expect(try JournalContents.read(path).tasks.keys.sorted() == [51], "appends go on after a rewrite")
    }

    @Test("a write that fails (a full disk) gives its lines back before those buffered since, in order, for the next try")
    func failedWriteIsRetried() throws {
        // /dev/full takes the open and fails every write with ENOSPC.
        let journal = try SessionJournal(path: "/dev/full", contents: JournalContents())
        try journal.append(.task(sampleTask(1)))
        try journal.append(.task(sampleTask(2)))
        let write = try #require(journal.takeWrite())
        #expect(!journal.hasPending)
        #expect(throws: Errno.self) { try write.perform() }
        try journal.append(.task(sampleTask(3)))
        journal.writeFailed(write)
        let retry = try #require(journal.takeWrite())
        #expect(retry.lineCount == 3)
        let lines = JournalContents(parsing: retry.data)
        #expect(lines.lineCount == 3 && lines.unreadable.isEmpty)
        #expect(lines.tasks.keys.sorted() == [1, 2, 3])
        journal.writeFailed(retry)
        #expect(throws: Errno.self) { try journal.commit() }
        #expect(journal.hasPending, "commit() keeps the lines buffered when it fails")
        #expect(journal.lineCount == 0)
    }

    @Test("a compaction that fails leaves the journal as it was, and the next write replaces it whole")
    func failedCompactionIsRetriedWhole() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("journal.jsonl").path
        let journal = try SessionJournal(path: path, contents: JournalContents())
        try journal.append(.task(sampleTask(1)))
        try journal.commit()
        try journal.append(.task(sampleTask(2)))
        var contents = JournalContents()
        contents.tasks = [1: sampleTask(1), 2: sampleTask(2)]
        let replacement = try journal.replacement(contents.compacted)
        #expect(!journal.hasPending, "the replacement says what the buffered lines said")
        // The journal's name is made a folder for a moment: renaming the new file onto it fails.
        let hidden = path + ".hidden"
        #expect(rename(path, hidden) == 0)
        #expect(mkdir(path, 0o700) == 0)
        #expect(throws: Errno.self) { try replacement.perform() }
        journal.writeFailed(replacement)
        #expect(journal.needsReplacement)
        #expect(rmdir(path) == 0 && rename(hidden, path) == 0)
        #expect(try JournalContents.read(path).tasks.keys.sorted() == [1], "the journal is as it was")
        let again = try journal.replacement(contents.compacted)
        try again.perform()
        journal.didWrite(again)
        #expect(!journal.needsReplacement)
        #expect(journal.lineCount == 3)
        #expect(try JournalContents.read(path).tasks.keys.sorted() == [1, 2])
    }
}
