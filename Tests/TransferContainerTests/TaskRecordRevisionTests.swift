import Foundation
import Testing
import TransferContainer
import TransferCoding

@Suite("TaskRecord revisions")
struct TaskRecordRevisionTests {
    @Test("a task record written before revisions were kept reads as revision 0; a revision is kept across a write and read")
    func recordRevision() throws {
        var record = TaskRecord(taskIdentifier: 3, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/a"), createdAt: exactDate)
        record.revision = 41
        let json = String(decoding: try RecordCoding.encoder().encode(record), as: UTF8.self)
        #expect(json.contains(#""revision" : 41"#))
        #expect(try RecordCoding.decoder().decode(TaskRecord.self, from: Data(json.utf8)) == record)

        let old = json.replacingOccurrences(of: #""revision" : 41,"#, with: "")
        #expect(!old.contains("revision"))
        let read = try RecordCoding.decoder().decode(TaskRecord.self, from: Data(old.utf8))
        #expect(read.revision == 0)
        record.revision = 0
        #expect(read == record)

        let wrong = json.replacingOccurrences(of: #""revision" : 41"#, with: #""revision" : "41""#)
        #expect(throws: DecodingError.self) { try RecordCoding.decoder().decode(TaskRecord.self, from: Data(wrong.utf8)) }
    }

    @Test("nextRevision(after:) is one past both the copy and the record it replaces")
    func nextRevision() {
        var stored = TaskRecord(taskIdentifier: 1, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/a"))
        stored.revision = 5
        var staleCopy = stored
        staleCopy.revision = 3
        #expect(staleCopy.nextRevision(after: stored).revision == 6, "a copy taken before earlier writes does not repeat a revision")
        #expect(stored.nextRevision(after: stored).revision == 6)
        #expect(stored.nextRevision(after: nil).revision == 6)
        #expect(TaskRecord(taskIdentifier: 2, kind: .upload, originalRequest: RequestRecord(url: "http://127.0.0.1:9/b")).nextRevision(after: nil).revision == 1)
    }
}
