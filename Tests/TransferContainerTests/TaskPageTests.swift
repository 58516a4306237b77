import Foundation
import Testing
import TransferContainer

/// A page of task records is bounded in bytes as well as in records (issue 45, item 2): records
/// that count exactly `DaemonReply.bytesPerPage` together make one page, one byte more makes
/// two; a record larger than a page alone still makes a page, so that paging moves on.
@Suite struct TaskPageTests {
    /// A download record that counts exactly `bytes` (`HeldBytes`), its URL padded.
    private func record(_ identifier: Int, counting bytes: Int) throws -> TaskRecord {
        let stem = "http://127.0.0.1:9/page?q="
        var task = TaskRecord(taskIdentifier: identifier, kind: .download, originalRequest: RequestRecord(url: stem))
        task.originalRequest.url = stem + String(repeating: "a", count: bytes - HeldBytes.of(task))
        try #require(HeldBytes.of(task) == bytes)
        return task
    }

    @Test("Two records of half a page each fit one page; one byte more and the second goes to the next")
    func bytesAtAndOnePast() throws {
        let half = DaemonReply.bytesPerPage / 2
        #expect(DaemonReply.pageLength(of: [try record(1, counting: half), try record(2, counting: half)]) == 2)
        #expect(DaemonReply.pageLength(of: [try record(1, counting: half), try record(2, counting: half + 1)]) == 1)
    }

    @Test("A record larger than a page makes a page of its own; small records stop at tasksPerPage")
    func progressAndCount() throws {
        #expect(DaemonReply.pageLength(of: [try record(1, counting: DaemonReply.bytesPerPage + 1), try record(2, counting: 1_000)]) == 1)
        let small = try record(1, counting: HeldBytes.perRecord + 30)
        #expect(DaemonReply.pageLength(of: Array(repeating: small, count: DaemonReply.tasksPerPage + 1)) == DaemonReply.tasksPerPage)
    }
}
