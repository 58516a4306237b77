import Foundation
import Testing
import TransferContainer

@Suite("InPlaceRecord")
struct InPlaceRecordTests {
    struct Mark: Codable, Equatable {
        var number: Int
        var note: String?
    }

    @Test("each write replaces the record in place: same file, fixed size, the last write reads back")
    func rewrites() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let record = InPlaceRecord<Mark>(path: directory.path("mark.json"))
        #expect(try record.read() == nil)
        try record.write(Mark(number: 1, note: String(repeating: "long ", count: 40)))
        let inode = try FileManager.default.attributesOfItem(atPath: record.path)[.systemFileNumber] as? UInt64
        try record.write(Mark(number: 2))
        #expect(try record.read() == Mark(number: 2), "a shorter record leaves nothing of the longer one")
        let attributes = try FileManager.default.attributesOfItem(atPath: record.path)
        #expect(attributes[.systemFileNumber] as? UInt64 == inode, "no new file per write")
        #expect((attributes[.size] as? NSNumber)?.intValue == InPlaceRecord<Mark>.size)
        #expect(try InPlaceRecord<Mark>(path: record.path).read() == Mark(number: 2), "another reader sees it")
    }

    @Test("a record too large for the fixed size is refused, and the old one stays")
    func tooLarge() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let record = InPlaceRecord<Mark>(path: directory.path("mark.json"))
        try record.write(Mark(number: 1))
        #expect(throws: RecordError.self) { try record.write(Mark(number: 2, note: String(repeating: "x", count: 600))) }
        #expect(try record.read() == Mark(number: 1))
    }
}
