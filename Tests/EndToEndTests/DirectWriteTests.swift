import Foundation
import Testing
import LoopbackServer
import TransferPOSIX

/// A long download is written direct (`O_DIRECT`, past the page cache) where the container's
/// file system takes it, and through the page cache where it does not: either way the file
/// delivered is the server's, byte for byte. The file system is `powercutfs` (FUSE), which can
/// refuse every direct write with EINVAL, as file systems without direct I/O do.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct DirectWriteTests {
    /// Three chunks (`BodyFileWriter.directChunk`, 1 MiB) and a few bytes: the body has whole
    /// chunks written direct, then at its end whole blocks written direct and a tail off the
    /// block through the page cache.
    static let size = 3 * (1 << 20) + 4_321

    @Test("A 3 MiB download lands whole on a file system that takes direct writes, and on one that refuses every one of them",
          .enabled(if: PowerCutFileSystem.unavailableReason == nil, "skipped: /dev/fuse is absent (these tests need FUSE)"),
          arguments: [false, true])
    func downloadLandsWhole(refusingDirectWrites: Bool) throws {
        let stage = try PowerCutStage(firstBacking: "backing")
        defer { stage.end() }
        let base = stage.base, container = stage.container
        let server = try LoopbackServer()
        defer { server.stop() }
        let body = PowerCutLedger.payload(name: "direct-\(Self.size).bin")
        server.serve("/files/direct.bin", data: body)
        _ = try stage.mount(backing: stage.firstBacking, survivors: base.appendingPathComponent("survivors"), marker: base.appendingPathComponent("cut.done"),
                            refuseDirect: refusingDirectWrites)
        try Self.expectDirectWrites(under: URL(fileURLWithPath: container.root), taken: !refusingDirectWrites)
        _ = try DaemonUnderTest.start(container)

        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/files/direct.bin").absoluteString, "--wait"], in: container)
        #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
        let saved = try Data(contentsOf: container.downloads.appendingPathComponent("direct.bin"))
        #expect(saved.count == Self.size)
        // Compared as a Bool: Swift Testing would diff two 3 MiB values element by element.
        let same = saved == body
        let firstDifference = zip(saved, body).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(same, "the file is not the server's: first difference at byte \(firstDifference.map(String.init) ?? "none (lengths differ)")")
    }

    /// On the test's own file system (direct writes where it takes them, as here; the same
    /// holds through the page cache elsewhere).
    @Test("transferd SIGKILLed while a long body is written direct leaves a partial file that is the body's first bytes; the next daemon resumes from its size and the file lands whole")
    func killedMidBodyLeavesAPrefix() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        // 6 MiB and some, at 4 MiB/s: the kill comes with whole chunks on disk and more to come.
        let size = 6 * (1 << 20) + 777
        let body = PowerCutLedger.payload(name: "killed-\(size).bin")
        server.serve("/files/killed.bin", data: body, options: RouteOptions(bytesPerSecond: 4 << 20))
        let daemon = try DaemonUnderTest.start(container)
        #expect(try Executable.hostApp.run(["download", server.url(for: "/files/killed.bin").absoluteString], in: container).status == 0)
        let partial = container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer/com.example.host.background/task-1.partial")
        let onDisk = { ((try? FileManager.default.attributesOfItem(atPath: partial.path))?[.size] as? NSNumber)?.intValue ?? 0 }
        try #require(waitUntil(timeout: 30) { onDisk() >= 2 << 20 }, "the download did not get 2 MiB on disk: \(onDisk()) bytes")
        daemon.process.kill(signal: SIGKILL)
        _ = daemon.process.wait(timeout: 10)

        // Read once the daemon is gone: a direct write under way at the kill ends first.
        let kept = try Data(contentsOf: partial)
        try #require(kept.count > 0 && kept.count < size, "the partial file holds \(kept.count) bytes")
        let isPrefix = kept == body.prefix(kept.count)
        #expect(isPrefix, "the partial file (\(kept.count) bytes) is not the body's first bytes")

        _ = try DaemonUnderTest.start(container)
        let delivered = container.downloads.appendingPathComponent("killed.bin")
        let whole = waitUntil(timeout: 60) { FileManager.default.contents(atPath: delivered.path) == body }
        #expect(whole, "the file did not land whole: \(FileManager.default.contents(atPath: delivered.path)?.count ?? 0) bytes")
        let range = server.requests.last { $0.path == "/files/killed.bin" }?.header("Range")
        #expect(range == "bytes=\(kept.count)-", "resumed with Range \(range ?? "none"), not from the \(kept.count) bytes on disk")
    }

    /// Whether the file system under `root` takes one aligned direct write: checked, so that
    /// each case runs the path it names.
    static func expectDirectWrites(under root: URL, taken: Bool) throws {
        let path = root.appendingPathComponent("direct-write-probe").path
        let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT)
        defer { file.close(); unlink(path) }
        let channel = try #require(try? DirectWriteChannel(reopening: file), "the file system refuses to open a file with O_DIRECT")
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: DirectWriteChannel.alignment, alignment: DirectWriteChannel.alignment)
        defer { block.deallocate() }
        block.initializeMemory(as: UInt8.self, repeating: 0x5a)
        channel.startWrite(UnsafeRawBufferPointer(block), at: 0)
        let outcome = Result { try channel.waitForWrite() }
        if taken {
            #expect((try? outcome.get()) == DirectWriteChannel.alignment, "a direct write of a block: \(outcome)")
        } else {
            #expect((outcome.failure as? Errno)?.code == EINVAL, "a direct write where they are refused: \(outcome)")
        }
    }
}

private extension Result {
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
