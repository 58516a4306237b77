import Foundation
import Testing
import LoopbackServer
import TransferPOSIX

/// A long download is written direct (`O_DIRECT`, past the page cache) where the container's
/// file system takes it, and through the page cache where it does not: either way the file
/// delivered is the server's, byte for byte. The file system is `powercutfs` (FUSE), which can
/// refuse every direct write with EINVAL, as file systems without direct I/O do.
@Suite(.serialized, .timeLimit(.minutes(5)))
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
