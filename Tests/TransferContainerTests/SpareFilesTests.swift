import Foundation
import Testing
@testable import TransferContainer

/// Spare files: made ahead on their own thread, renamed into place, never over a file that
/// exists, removed when no longer wanted, and found again by the next daemon.
@Suite final class SpareFilesTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("spares-\(UUID().uuidString)").path
    var spareDirectory: String { root + "/Spares" }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func spares() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: spareDirectory)) ?? []).filter { $0.hasPrefix(".spare-") }
    }

    /// Waits (at most 10 s) until the spare folder holds `count` spares, all of them ready.
    private func waitForSpares(_ count: Int, in files: SpareFiles) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if spares().count == count && files.readyCount == count { return true }
            usleep(2_000)
        }
        return false
    }

    @Test("Spares are made as asked; taking one renames it into place and another is made")
    func takeRenames() throws {
        let files = SpareFiles(directory: spareDirectory)
        defer { files.stop() }
        files.want(3)
        #expect(waitForSpares(3, in: files))
        let target = root + "/task-1.partial"
        #expect(files.take(to: target))
        var st = stat()
        #expect(stat(target, &st) == 0 && st.st_size == 0 && st.st_mode & 0o777 == 0o600)
        #expect(waitForSpares(3, in: files))
    }

    @Test("A file that exists is never replaced: a partial download to resume stays")
    func neverReplaces() throws {
        let files = SpareFiles(directory: spareDirectory)
        defer { files.stop() }
        files.want(1)
        #expect(waitForSpares(1, in: files))
        let target = root + "/task-2.partial"
        try Data("bytes to resume from".utf8).write(to: URL(fileURLWithPath: target))
        #expect(!files.take(to: target))
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "bytes to resume from")
        #expect(spares().count == 1)
        #expect(files.take(to: root + "/task-3.partial")) // the spare is still there to take
    }

    @Test("Spares no longer wanted are removed; those a stopped daemon left are taken by the next")
    func removedAndFoundAgain() throws {
        let first = SpareFiles(directory: spareDirectory)
        first.want(4)
        #expect(waitForSpares(4, in: first))
        first.want(2)
        #expect(waitForSpares(2, in: first))
        first.stop()

        let next = SpareFiles(directory: spareDirectory)
        defer { next.stop() }
        next.want(2)
        #expect(waitForSpares(2, in: next))
        #expect(next.take(to: root + "/a"))
        #expect(next.take(to: root + "/b"))
    }

    @Test("Without spares, take says so and the caller creates the file itself")
    func noSpares() {
        let files = SpareFiles(directory: spareDirectory)
        #expect(!files.take(to: root + "/task-4.partial"))
    }
}
