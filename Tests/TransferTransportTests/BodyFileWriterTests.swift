import Foundation
import Glibc
import Testing
import TransferPOSIX
@testable import TransferTransport

private let chunk = BodyFileWriter.directChunk
private let block = DirectWriteChannel.alignment

/// A download's body reaches its file whole and in order, whichever way the writer takes
/// (direct or through the page cache), whatever the pieces, the offset it starts at and the
/// flushes in between; and the file is a prefix of the body whenever the writer stops.
@Suite(.timeLimit(.minutes(20)))
struct BodyFileWriterTests {
    /// Whether files in the temporary folder take direct writes and keep them out of the page
    /// cache: not on tmpfs (whose pages are its storage, direct or not) nor on a file system
    /// that refuses `O_DIRECT`. The tests that say "direct" need it; the others run anywhere (elsewhere the
    /// writer goes through the page cache, which `DirectWriteTests` shows end to end).
    static let temporaryFolderTakesDirectWrites: Bool = {
        // One block written direct, then asked whether the page cache holds it.
        let path = FileManager.default.temporaryDirectory.path + "/direct-write-probe-\(UUID().uuidString)"
        guard let file = try? FileDescriptor.open(path, O_WRONLY | O_CREAT) else { return false }
        defer { file.close(); unlink(path) }
        guard let channel = try? DirectWriteChannel(reopening: file) else { return false }
        let block = UnsafeMutableRawBufferPointer.allocate(byteCount: DirectWriteChannel.alignment, alignment: DirectWriteChannel.alignment)
        defer { block.deallocate() }
        block.initializeMemory(as: UInt8.self, repeating: 1)
        channel.startWrite(UnsafeRawBufferPointer(block), at: 0)
        guard (try? channel.waitForWrite()) == DirectWriteChannel.alignment else { return false }
        return (try? pagesInPageCache(of: path, from: 0)) == 0
    }()

    /// A generator the runs can repeat (the seed is in every failure's message).
    struct Random {
        var state: UInt64
        mutating func next(below bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(max(bound, 1)))
        }
    }

    /// `count` bytes that differ at every offset a misplaced write could put them (a word of
    /// the generator per eight bytes).
    static func body(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < count {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                var word = state ^ (state >> 29)
                for _ in 0..<min(8, count - offset) {
                    raw[offset] = UInt8(truncatingIfNeeded: word)
                    word >>= 8
                    offset += 1
                }
            }
        }
        return bytes
    }

    /// A file in a folder of its own, holding `prefix` (the bytes a resumed download has).
    static func makeFile(holding prefix: [UInt8]) throws -> (path: String, file: FileDescriptor, folder: URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("body-writer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("task-1.partial").path
        try Data(prefix).write(to: URL(fileURLWithPath: path))
        return (path, try FileDescriptor.open(path, O_WRONLY), folder)
    }

    /// How many of the file's pages from byte `from` on are in the page cache (`mincore`): a
    /// body written direct leaves none there but the few written around its unaligned ends.
    static func pagesInPageCache(of path: String, from: Int) throws -> Int {
        let file = try FileDescriptor.open(path, O_RDONLY)
        defer { file.close() }
        let size = Int(try file.size())
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let first = (from / page) * page
        guard size > first else { return 0 }
        guard let mapped = mmap(nil, size - first, PROT_READ, MAP_SHARED, file.rawValue, off_t(first)), mapped != MAP_FAILED else {
            throw Errno.current("mmap", path: path)
        }
        defer { munmap(mapped, size - first) }
        var resident = [UInt8](repeating: 0, count: (size - first + page - 1) / page)
        guard mincore(mapped, size - first, &resident) == 0 else { throw Errno.current("mincore", path: path) }
        return resident.filter { $0 & 1 != 0 }.count
    }

    /// Appends `body` after `offset` bytes in pieces of random sizes (some empty, some larger
    /// than a chunk), flushing at random points, then flushes; returns whether it wrote direct,
    /// and how many of the body's pages past its first are in the page cache.
    @discardableResult
    static func writeAndCheck(offset: Int, length: Int, seed: UInt64, flushes: Bool = true) throws -> (direct: Bool, cachedPages: Int) {
        let whole = body(offset + length, seed: seed)
        let (path, file, folder) = try makeFile(holding: Array(whole[..<offset]))
        defer { file.close(); try? FileManager.default.removeItem(at: folder) }
        let writer = BodyFileWriter(file: file, at: Int64(offset), restOfBody: Int64(length), allowDirect: true)
        var random = Random(state: seed ^ 0x9e37)
        var at = offset
        try whole.withUnsafeBytes { all in
            while at < whole.count {
                let size: Int
                switch random.next(below: 20) {
                case 0: size = 0
                case 1: size = chunk + random.next(below: 3 * block)
                case 2: size = 1
                default: size = 1 + random.next(below: 16 << 10)
                }
                let end = min(whole.count, at + size)
                try writer.append(UnsafeRawBufferPointer(rebasing: all[at..<end]))
                at = end
                if flushes && random.next(below: 40) == 0 {
                    try writer.flush()
                    #expect(writer.bytesInFile == Int64(at), "after a flush the file holds every byte appended (seed \(seed))")
                }
            }
        }
        try writer.flush()
        #expect(writer.bytesInFile == Int64(whole.count))
        let direct = writer.writesDirect
        writer.close()
        // Looked at before the file is read back, which brings every page in.
        let cachedPages = try pagesInPageCache(of: path, from: offset + block)
        let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(written.count == whole.count, "offset \(offset), length \(length), seed \(seed): \(written.count) bytes in the file")
        #expect(written == whole, "offset \(offset), length \(length), seed \(seed): the file is not the body")
        return (direct, cachedPages)
    }

    @Test("A long body is written direct and lands whole, from every kind of offset (0, 1, one short of a block, a block, one past, one short of a chunk): of its pages only the unaligned ends pass through the page cache",
          .enabled(if: BodyFileWriterTests.temporaryFolderTakesDirectWrites, "the temporary folder is on tmpfs or on a file system without O_DIRECT: nothing is written direct there"))
    func longBodyFromAnyOffset() throws {
        for (index, offset) in [0, 1, block - 1, block, block + 1, chunk - 1].enumerated() {
            let length = 3 * chunk + 12_345
            let (direct, cachedPages) = try Self.writeAndCheck(offset: offset, length: length, seed: UInt64(20_261_128 + index), flushes: false)
            #expect(direct, "a body of \(length) bytes still to come is written direct (offset \(offset))")
            // ext4 quietly writes an unaligned direct write through the page cache: only the
            // pages around the ends may be there (the page after the first, the last two).
            #expect(cachedPages <= 2, "offset \(offset): \(cachedPages) of the body's pages went through the page cache")
        }
    }

    @Test("Bodies at the edges of the threshold and of the chunks: one byte short of it goes through the page cache; the threshold itself, whole chunks, a chunk and a byte, go direct",
          .enabled(if: BodyFileWriterTests.temporaryFolderTakesDirectWrites, "the temporary folder is on tmpfs or on a file system without O_DIRECT: nothing is written direct there"))
    func lengthsAtTheEdges() throws {
        let threshold = Int(BodyFileWriter.directThreshold)
        let cases: [(length: Int, direct: Bool)] = [
            (1, false), (block, false), (threshold - 1, false),
            (threshold, true), (threshold + 1, true), (4 * chunk, true), (4 * chunk + 1, true), (5 * chunk - 1, true),
        ]
        for (index, item) in cases.enumerated() {
            let direct = try Self.writeAndCheck(offset: 0, length: item.length, seed: UInt64(7_000 + index)).direct
            #expect(direct == item.direct, "length \(item.length): direct \(direct), expected \(item.direct)")
        }
    }

    @Test("Many random bodies, offsets, piece sizes and checkpoints: each file is the body byte for byte")
    func randomBodies() throws {
        var random = Random(state: 424_242)
        for round in 0..<24 {
            let offset = [0, random.next(below: 3 * block), random.next(below: 2 * chunk)][random.next(below: 3)]
            let length = random.next(below: 5 * chunk)
            try Self.writeAndCheck(offset: offset, length: length, seed: UInt64(round) &* 977 &+ 13, flushes: round % 2 == 0)
        }
    }

    @Test("A writer stopped without a flush (a cancel's close, a kill) leaves a prefix of the body, at least `bytesInFile` long",
          .enabled(if: BodyFileWriterTests.temporaryFolderTakesDirectWrites, "the temporary folder is on tmpfs or on a file system without O_DIRECT: nothing is written direct there"))
    func stoppedWriterLeavesAPrefix() throws {
        for (index, stopAt) in [1, block + 7, chunk, chunk + 1, 2 * chunk + block, 3 * chunk - 1].enumerated() {
            let offset = index % 2 == 0 ? 0 : 1_000
            let whole = Self.body(offset + 4 * chunk, seed: UInt64(31 + index))
            let (path, file, folder) = try Self.makeFile(holding: Array(whole[..<offset]))
            defer { file.close(); try? FileManager.default.removeItem(at: folder) }
            let writer = BodyFileWriter(file: file, at: Int64(offset), restOfBody: Int64(4 * chunk), allowDirect: true)
            #expect(writer.writesDirect)
            var at = offset
            try whole.withUnsafeBytes { all in
                while at < offset + stopAt {
                    let end = min(offset + stopAt, at + 16 << 10)
                    try writer.append(UnsafeRawBufferPointer(rebasing: all[at..<end]))
                    at = end
                }
            }
            let claimed = writer.bytesInFile
            writer.close()
            let written = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(Int64(written.count) >= claimed, "stopped at \(stopAt): \(written.count) bytes in the file, \(claimed) claimed")
            #expect(written.count <= at)
            #expect(written == Array(whole[..<written.count]), "stopped at \(stopAt): the file is not a prefix of the body")
        }
    }

    @Test("A file that refuses every write (/dev/full): the first failure is thrown, and again by every later call, with no byte counted past the offset")
    func failureIsThrownAndKept() throws {
        let file = try FileDescriptor.open("/dev/full", O_WRONLY)
        defer { file.close() }
        // Long enough to try the direct way first: /dev/full has no AIO, so it falls back.
        let writer = BodyFileWriter(file: file, at: 0, restOfBody: 8 * Int64(chunk), allowDirect: true)
        defer { writer.close() }
        let piece = [UInt8](repeating: 7, count: 16 << 10)
        var firstError: Errno?
        for _ in 0..<(2 * chunk / piece.count) where firstError == nil {
            do {
                try piece.withUnsafeBytes { try writer.append($0) }
            } catch {
                firstError = error as? Errno ?? Errno(EIO, "unexpected \(error)")
            }
        }
        let error = try #require(firstError, "writes to /dev/full were taken")
        #expect(error.code == ENOSPC, "\(error)")
        #expect(writer.bytesInFile == 0)
        #expect(throws: Errno.self) { try piece.withUnsafeBytes { try writer.append($0) } }
        #expect(throws: Errno.self) { try writer.flush() }
        #expect(writer.bytesInFile == 0)
    }

    @Test("An error page is never written direct, however long")
    func errorPagesGoThroughThePageCache() throws {
        let (_, file, folder) = try Self.makeFile(holding: [])
        defer { file.close(); try? FileManager.default.removeItem(at: folder) }
        let writer = BodyFileWriter(file: file, at: 0, restOfBody: 64 * Int64(chunk), allowDirect: false)
        defer { writer.close() }
        #expect(!writer.writesDirect)
    }
}
