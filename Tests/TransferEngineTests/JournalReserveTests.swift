#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// The free-space rule for the journals on its own: a new task may not eat into the reserve,
/// and the refusal is Apple's -3003 naming the journal.
@Suite struct JournalReserveTests {
    let journal = "/container/Sessions/com.example.host/s/journal.jsonl"
    let reserve = JournalReserve(reserve: 1 << 20)

    @Test("a new task is accepted while what it may write leaves the reserve free, and refused once it would not")
    func reserveBoundary() {
        let allowance = JournalReserve.newTaskAllowance
        #expect(reserve.refusalOfNewTask(available: (1 << 20) + allowance, journal: journal) == nil)
        let refusal = reserve.refusalOfNewTask(available: (1 << 20) + allowance - 1, journal: journal)
        #expect(refusal?.code == TransferFailure.cannotWriteToFile)
        #expect(refusal?.subject == journal)
        #expect(reserve.refusalOfNewTask(available: 0, journal: journal) != nil)
    }

    @Test("with no reserve, a full disk still refuses a new task; free space that cannot be read refuses nothing")
    func noReserve() {
        let none = JournalReserve(reserve: 0)
        #expect(none.refusalOfNewTask(available: 0, journal: journal)?.code == TransferFailure.cannotWriteToFile)
        #expect(none.refusalOfNewTask(available: JournalReserve.newTaskAllowance, journal: journal) == nil)
        #expect(JournalReserve(reserve: -5).reserve == 0, "a negative reserve counts as none")
        #expect(reserve.refusalOfNewTask(available: nil, journal: journal) == nil, "the commit has the last word")
    }

    @Test("while commits fail, changes are refused with -3003 naming where the change would go, not the file that failed; out of space says so")
    func refusalWhileCommitsFail() {
        let other = "/container/Sessions/com.example.other/theirs/journal.jsonl"
        let full = JournalReserve.cannotRecord(Errno(ENOSPC, "write", path: other), writing: journal)
        #expect(full.code == TransferFailure.cannotWriteToFile)
        #expect(full.subject == journal)
        #expect(full.message.contains("NSFileWriteOutOfSpaceError"))
        #expect(!full.message.contains(other), "another app's session is not named")
        let failing = JournalReserve.cannotRecord(Errno(EIO, "fdatasync", path: other), writing: journal)
        #expect(failing.code == TransferFailure.cannotWriteToFile)
        #expect(failing.subject == journal)
        #expect(!failing.message.contains("NSFileWriteOutOfSpaceError"), "an I/O error is not a full disk")
        #expect(!failing.message.contains(other))
    }

    @Test("the free space of a real file system is read")
    func availableSpace() {
        let available = JournalReserve.availableSpace(at: FileManager.default.temporaryDirectory.path)
        #expect((available ?? -1) >= 0)
        #expect(JournalReserve.availableSpace(at: "/nonexistent-\(UUID().uuidString)") == nil)
    }
}
