import Foundation
import Testing
@testable import TransferPOSIX

/// Spare files: made ahead on their own thread with no name, named into place when taken,
/// never over a file that exists, and leaving nothing behind.
@Suite final class SpareFilesTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("spares-\(UUID().uuidString)").path

    init() throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func entries() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
    }

    /// Waits (at most 10 s) until `count` spares are ready.
    private func waitForSpares(_ count: Int, in files: SpareFiles) async -> Bool {
        await eventually { files.readyCount == count }
    }

    @Test("Spares are made as asked, with no name; taking one names it, empty, private and writable, and another is made")
    func takeNames() async throws {
        let files = SpareFiles(directory: root)
        defer { files.stop() }
        files.want(3)
        #expect(await waitForSpares(3, in: files))
        #expect(entries().isEmpty)
        let target = root + "/task-1.partial"
        let file = try #require(files.take(to: target))
        defer { file.close() }
        var st = stat()
        #expect(stat(target, &st) == 0 && st.st_size == 0 && st.st_mode & 0o777 == 0o600)
        try file.writeAll(Data("body".utf8))
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "body")
        #expect(await waitForSpares(3, in: files))
        #expect(entries() == ["task-1.partial"])
    }

    @Test("A file that exists is never replaced: a partial download to resume stays")
    func neverReplaces() async throws {
        let files = SpareFiles(directory: root)
        defer { files.stop() }
        files.want(1)
        #expect(await waitForSpares(1, in: files))
        let target = root + "/task-2.partial"
        try Data("bytes to resume from".utf8).write(to: URL(fileURLWithPath: target))
        #expect(files.take(to: target) == nil)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "bytes to resume from")
        #expect(files.readyCount == 1) // the spare is still there to take
        let other = try #require(files.take(to: root + "/task-3.partial"))
        other.close()
    }

    @Test("Spares no longer wanted are closed, and a stopped daemon's leave no file behind")
    func closedAndNothingLeft() async throws {
        let files = SpareFiles(directory: root)
        files.want(4)
        #expect(await waitForSpares(4, in: files))
        files.want(2)
        #expect(await waitForSpares(2, in: files))
        files.stop()
        #expect(await waitForSpares(0, in: files))
        #expect(entries().isEmpty)
    }

    @Test("Without spares, take says so and the caller creates the file itself")
    func noSpares() {
        let files = SpareFiles(directory: root)
        #expect(files.take(to: root + "/task-4.partial") == nil)
        #expect(entries().isEmpty)
    }

    @Test("Spares cannot be named on another file system: take says so and no more are made")
    func otherFileSystem() async throws {
        let files = SpareFiles(directory: root)
        defer { files.stop() }
        files.want(2)
        #expect(await waitForSpares(2, in: files))
        guard FileManager.default.isWritableFile(atPath: "/dev/shm"), !sameFileSystem(root, "/dev/shm") else { return }
        let elsewhere = "/dev/shm/spare-test-\(UUID().uuidString)"
        defer { unlink(elsewhere) }
        #expect(files.take(to: elsewhere) == nil)
        #expect(!FileManager.default.fileExists(atPath: elsewhere))
        #expect(await waitForSpares(0, in: files)) // the others are closed
        files.want(3)
        #expect(files.readyCount == 0)
        #expect(files.take(to: root + "/task-5.partial") == nil)
    }

    private func sameFileSystem(_ a: String, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev
    }
}
