#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
import TransferCoding
import TransferPOSIX

@Suite("DurableFile")
struct DurableFileTests {
    @Test("write creates a 0600 file and leaves no temporary file behind")
    func writeNew() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("record.json")
        try DurableFile.write(Data("first".utf8), to: path)
        #expect(FileManager.default.contents(atPath: path) == Data("first".utf8))
        #expect(permissions(path) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["record.json"])
    }

    @Test("write replaces the whole file, even with shorter contents, and makes it 0600")
    func replace() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("record.json")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 10_000), attributes: [.posixPermissions: 0o644]))
        #expect(permissions(path) == 0o644)
        try DurableFile.write(Data("short".utf8), to: path)
        #expect(FileManager.default.contents(atPath: path) == Data("short".utf8))
        #expect(permissions(path) == 0o600)
        try DurableFile.write(Data(), to: path, syncDirectory: false)
        #expect(FileManager.default.contents(atPath: path) == Data())
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["record.json"])
    }

    @Test("write replaces by rename: a reader holding the old file keeps the old contents")
    func atomicReplace() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("record.json")
        try DurableFile.write(Data("old contents".utf8), to: path)
        let reader = try #require(FileHandle(forReadingAtPath: path))
        defer { try? reader.close() }
        try DurableFile.write(Data("new".utf8), to: path)
        #expect(try reader.readToEnd() == Data("old contents".utf8))
        #expect(FileManager.default.contents(atPath: path) == Data("new".utf8))
    }

    @Test("write into a missing folder throws ENOENT and creates nothing")
    func writeIntoMissingFolder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let error = try #require(throws: Errno.self) { try DurableFile.write(Data("x".utf8), to: directory.path("missing/record.json")) }
        #expect(error.code == ENOENT)
        #expect(error.description.contains(directory.path("missing")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test("remove deletes a file; removing a missing file is fine")
    func remove() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("gone.json")
        try DurableFile.write(Data("x".utf8), to: path)
        try DurableFile.remove(path)
        #expect(!FileManager.default.fileExists(atPath: path))
        try DurableFile.remove(path)
        try DurableFile.remove(path, syncDirectory: false)
    }

    @Test("makeDirectory creates every missing parent with mode 0700 and may run twice")
    func makeDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let deep = directory.path("a/b/c/d")
        try DurableFile.makeDirectory(deep)
        try DurableFile.makeDirectory(deep)
        for relative in ["a", "a/b", "a/b/c", "a/b/c/d"] {
            #expect(isDirectory(directory.path(relative)), "\(relative)")
            #expect(permissions(directory.path(relative)) == 0o700, "\(relative)")
        }
    }

    @Test("makeDirectory under a regular file throws ENOTDIR")
    func makeDirectoryUnderFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path("plain")
        try DurableFile.write(Data("x".utf8), to: file)
        let error = try #require(throws: Errno.self) { try DurableFile.makeDirectory(file + "/sub") }
        #expect(error.code == ENOTDIR)
    }

    @Test("makeDirectory where a regular file already is throws instead of reporting success")
    func makeDirectoryOverFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path("plain")
        try DurableFile.write(Data("x".utf8), to: file)
        #expect(throws: Errno.self) { try DurableFile.makeDirectory(file) }

        #expect(!isDirectory(file))
    }
}

@Suite("RecordCoding")
struct RecordCodingTests {
    @Test("a TaskRecord round-trips through a file")
    func taskRoundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("1.json")
        let task = sampleTask(1)
        try RecordCoding.write(task, to: path)
        #expect(try RecordCoding.read(TaskRecord.self, from: path) == task)
        #expect(permissions(path) == 0o600)
    }

    @Test("an EventRecord round-trips through a file, with its error and resume data")
    func eventRoundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("1.json")
        let event = sampleEvent(1)
        try RecordCoding.write(event, to: path)
        let back = try RecordCoding.read(EventRecord.self, from: path)
        #expect(back == event)
        #expect(back.error?.resumeData == Data([0, 1, 2, 255]))
    }

    @Test("a SessionRecord round-trips through a file")
    func sessionRoundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("session.json")
        let record = sampleSessionRecord()
        try RecordCoding.write(record, to: path)
        #expect(try RecordCoding.read(SessionRecord.self, from: path) == record)
    }

    @Test("records on disk are human-readable JSON with sorted keys and ISO 8601 dates with milliseconds")
    func format() throws {
        let text = String(decoding: try RecordCoding.encoder().encode(sampleTask(1)), as: UTF8.self)
        #expect(text.contains("\"createdAt\" : \"2023-11-14T22:13:20.125Z\""))
        #expect(text.contains("http://127.0.0.1:8080/files/1.bin")) // slashes not escaped
        let keys = text.split(separator: "\n").filter { $0.hasPrefix("  \"") }.map { $0.dropFirst(3).prefix { $0 != "\"" } }
        #expect(keys == keys.sorted())
        #expect(!keys.isEmpty)
    }

    @Test("dates keep their milliseconds when read back")
    func millisecondsSurvive() throws {
        let now = Date()
        let back = try RecordCoding.decoder().decode([Date].self, from: RecordCoding.encoder().encode([now]))
        #expect(abs(back[0].timeIntervalSince(now)) < 0.001)
        // Dates whose fraction is exact in binary come back equal.
        for fraction in [0.0, 0.125, 0.25, 0.5, 0.875] {
            let date = Date(timeIntervalSince1970: 1_700_000_000 + fraction)
            #expect(try RecordCoding.decoder().decode([Date].self, from: RecordCoding.encoder().encode([date])) == [date])
        }
        // A date without fractional seconds is accepted too.
        let plain = try RecordCoding.decoder().decode([Date].self, from: Data("[\"2023-11-14T22:13:20Z\"]".utf8))
        #expect(plain == [Date(timeIntervalSince1970: 1_700_000_000)])
    }

    @Test("every whole millisecond is written as that millisecond")
    func everyMillisecond() throws {
        var wrong: [String] = []
        for millisecond in 0..<1000 {
            let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(millisecond) / 1000)
            let text = String(decoding: try RecordCoding.encoder(pretty: false).encode([date]), as: UTF8.self)
            let expected = String(format: ".%03dZ", millisecond)
            if !text.contains(expected) { wrong.append("\(millisecond) ms → \(text)") }
        }
        #expect(wrong.count == 0, "\(wrong.count) of 1000 wrong, e.g. \(wrong.prefix(3).joined(separator: ", "))")

    }

    @Test("event times 1 ms apart keep their order, and stay distinct, when read back")
    func orderKept() throws {
        let base = Date(timeIntervalSince1970: 1_700_000_000)
        let dates = (0..<200).map { base.addingTimeInterval(Double($0) * 0.001) }
        let back = try RecordCoding.decoder().decode([Date].self, from: RecordCoding.encoder().encode(dates))
        #expect(back == back.sorted())
        #expect(Set(back).count == dates.count)

    }

    @Test("a missing file throws RecordError.unreadable naming the path")
    func missing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("missing.json")
        let error = try #require(throws: RecordError.self) { try RecordCoding.read(TaskRecord.self, from: path) }
        guard case .unreadable(let named, _) = error else {
            Issue.record("expected .unreadable, got \(error)")
            return
        }
        #expect(named == path)
        #expect(error.description.contains(path))
    }

    static let damaged: [(String, @Sendable (Data) -> Data)] = [
        ("truncated", { Data($0.prefix($0.count / 2)) }),
        ("closing brace cut", { Data($0.dropLast(2)) }),
        ("empty", { _ in Data() }),
        ("garbage", { _ in Data([0xFF, 0xFE, 0x00, 0x13, 0x37] + Array("not json at all".utf8)) }),
        ("wrong JSON shape", { _ in Data("[1, 2, 3]".utf8) }),
        ("missing field", { Data(String(decoding: $0, as: UTF8.self).replacingOccurrences(of: "\"taskIdentifier\"", with: "\"renamed\"").utf8) }),
    ]

    @Test("a damaged file throws RecordError.corrupt naming the path", arguments: damaged)
    func damagedFile(_ name: String, _ damage: @Sendable (Data) -> Data) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("task.json")
        let good = try RecordCoding.encoder().encode(sampleTask(3))
        try damage(good).write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: RecordError.self) { try RecordCoding.read(TaskRecord.self, from: path) }
        guard case .corrupt(let named, _) = error else {
            Issue.record("expected .corrupt for \(name), got \(error)")
            return
        }
        #expect(named == path)
        #expect(error.description.contains(path))
    }
}

@Suite("DurableFile under concurrency")
struct DurableFileConcurrencyTests {
    @Test("threads writing the same path at once each succeed and leave one whole version")
    func concurrentWriters() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("shared.json")
        let versions = (0..<8).map { Data(repeating: UInt8(0x41 + $0), count: 64 * 1024 + $0 * 997) }
        let collected = NSLock()
        nonisolated(unsafe) var failures: [String] = []
        // Real threads (GCD's), so that the writes overlap however busy the test pool is.
        DispatchQueue.concurrentPerform(iterations: versions.count) { index in
            for _ in 0..<50 {
                do { try DurableFile.write(versions[index], to: path, syncDirectory: false) } catch {
                    collected.lock()
                    failures.append("\(error)")
                    collected.unlock()
                }
            }
        }
        let final = try #require(FileManager.default.contents(atPath: path))
        #expect(failures.count == 0, "\(failures.count) of 400 writes failed, e.g. \(failures.first ?? "")")
        #expect(versions.contains(final), "the file holds a mix of versions")

        // Whatever happened, no temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["shared.json"])
    }
}
