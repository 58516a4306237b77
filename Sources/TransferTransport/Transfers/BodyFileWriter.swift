internal import Glibc
import CPOSIX
import TransferPOSIX

/// Writes a download's body into its file, in the order the bytes arrive, each byte at its
/// offset. libcurl hands a body over in pieces of at most 16 KiB; they are gathered and
/// written in large writes (a write a piece cost the daemon more CPU per GiB than curl).
///
/// Two ways to the disk:
/// - **Through the page cache**, in writes of up to `bufferedChunk` bytes, with writeback
///   started every `writebackInterval` bytes so that the final sync has little left to do.
///   For short bodies, bodies of unknown length, error pages, and file systems that refuse
///   the other way.
/// - **Direct**, for a body with at least `directThreshold` bytes still to come: aligned
///   writes of `directChunk` bytes with `O_DIRECT`, each started without waiting while the next
///   one fills (`DirectWriteChannel`, two buffers). The daemon then neither copies the body
///   into the page cache nor has it written back later, most of the CPU a large download cost
///   it (Benchmarks/README.md). Bytes that do not fill an aligned block (the body's first
///   bytes after an unaligned offset, what is pending at a checkpoint or at the end) go
///   through the page cache.
///
/// Either way, when a write is under way or has failed, the bytes the file holds are exactly
/// the body's first `bytesInFile` (one write at a time, in order): a partial file is always a
/// prefix of the body. Nothing is synced here; the commit's `fdatasync` of the file makes it
/// all durable, the direct writes included.
///
/// Owned by one `DownloadTransfer`, on the daemon's loop thread.
package final class BodyFileWriter {
    /// The largest write through the page cache.
    package static let bufferedChunk = 256 << 10
    /// The size of each direct write, and of each of its two buffers. 2 MiB did not write a
    /// 1 GiB download faster on this project's machine, and cost 2 MiB more a download
    /// (Benchmarks/README.md).
    package static let directChunk = 1 << 20
    /// The bytes still to come from which a body is written direct: below two chunks the
    /// buffers and the second descriptor cost more than they save.
    package static let directThreshold: Int64 = Int64(2 * directChunk)
    /// Bytes written through the page cache between background writebacks.
    package static let writebackInterval: Int64 = 8 << 20

    private let file: FileDescriptor
    private var direct: DirectWriteChannel?
    /// One buffer through the page cache, two when writing direct; allocated at the first
    /// byte that must wait for others.
    private var buffers: [UnsafeMutableRawBufferPointer] = []
    private let bufferSize: Int
    private var current = 0
    /// The file offset of the current buffer's first byte, its bytes, and how many it takes
    /// before it is written.
    private var start: Int64
    private var count = 0
    private var capacity: Int
    /// The direct write under way: its offset, length and buffer.
    private var underWay: (offset: Int64, length: Int, buffer: Int)?
    /// The body's bytes in the file: those before this offset, written (not synced).
    package private(set) var bytesInFile: Int64
    private var writebackStart: Int64
    /// Once a write failed, every later call throws this.
    private var failure: Errno?

    /// `offset`: where the body's next byte goes (the bytes on disk of a resumed download).
    /// `restOfBody`: the bytes still to come, when the length is known; `allowDirect`: false
    /// for a body that is not the download's (an error page).
    package init(file: FileDescriptor, at offset: Int64, restOfBody: Int64?, allowDirect: Bool) {
        self.file = file
        self.start = offset
        self.bytesInFile = offset
        self.writebackStart = offset
        if allowDirect, let rest = restOfBody, rest >= Self.directThreshold, let channel = try? DirectWriteChannel(reopening: file) {
            direct = channel
            bufferSize = Self.directChunk
        } else {
            // No bigger than the rest of the body, when its length is known.
            bufferSize = Int(min(Int64(Self.bufferedChunk), max(restOfBody ?? Int64(Self.bufferedChunk), 1)))
        }
        capacity = bufferSize
        capacity = nextCapacity()
    }

    /// Whether the body is being written direct (not through the page cache).
    package var writesDirect: Bool { direct != nil }

    /// Adds `bytes` after those appended before; writes whatever fills a buffer.
    package func append(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        if let failure { throw failure }
        var rest = bytes
        if direct == nil && count == 0 && rest.count >= capacity {
            // Nothing waiting and a piece as large as a write: no copy.
            try writeThroughPageCache(rest)
            return
        }
        while !rest.isEmpty {
            if buffers.isEmpty { allocateBuffers() }
            let n = min(capacity - count, rest.count)
            if direct != nil, let to = buffers[current].baseAddress, let from = rest.baseAddress {
                // Past the caches: the device reads this buffer; the loop reads back only a
                // tail under a block, or a write the file system refused.
                cposix_copy_streaming(to + count, from, n)
            } else {
                UnsafeMutableRawBufferPointer(rebasing: buffers[current][count..<(count + n)]).copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[..<n]))
            }
            count += n
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if count == capacity { try writeCurrentBuffer() }
        }
    }

    /// Writes every byte appended so far, and waits for the direct write under way: the file
    /// then holds the whole body received (`bytesInFile`), as at a checkpoint or the end.
    package func flush() throws(Errno) {
        if let failure { throw failure }
        try finishWriteUnderWay()
        guard count > 0 else { return }
        let alignment = DirectWriteChannel.alignment
        let aligned = count & ~(alignment - 1)
        if let direct, start % Int64(alignment) == 0, aligned > 0 {
            startDirectWrite(on: direct, length: aligned)
            try finishWriteUnderWay()
            // `current` moved on to the other buffer; the tail is in the one just written.
            try writeThroughPageCache(UnsafeRawBufferPointer(rebasing: buffers[current ^ 1][aligned..<count]), at: start + Int64(aligned))
        } else {
            try writeThroughPageCache(UnsafeRawBufferPointer(rebasing: buffers[current][..<count]), at: start)
        }
        moveToNextBuffer()
    }

    /// Waits for a direct write under way and frees the buffers; the writer is not used after.
    package func close() {
        if let direct, direct.isWriting { _ = try? direct.waitForWrite() }
        underWay = nil
        direct = nil
        for buffer in buffers { buffer.deallocate() }
        buffers = []
    }

    deinit { close() }

    // MARK: - Writes

    private func allocateBuffers() {
        let alignment = direct == nil ? 16 : DirectWriteChannel.alignment
        buffers = (0..<(direct == nil ? 1 : 2)).map { _ in .allocate(byteCount: bufferSize, alignment: alignment) }
    }

    /// How many bytes the buffer starting at `start` takes: a direct write needs an aligned
    /// offset, so after an unaligned one only the bytes up to the next block boundary, which
    /// go through the page cache.
    private func nextCapacity() -> Int {
        guard direct != nil else { return bufferSize }
        let misalignment = Int(start % Int64(DirectWriteChannel.alignment))
        return misalignment == 0 ? bufferSize : DirectWriteChannel.alignment - misalignment
    }

    /// Writes the full current buffer: direct when it is a whole aligned chunk (and the file
    /// system still takes direct writes once the one under way has ended).
    private func writeCurrentBuffer() throws(Errno) {
        try finishWriteUnderWay()
        if let direct, count == bufferSize, start % Int64(DirectWriteChannel.alignment) == 0 {
            startDirectWrite(on: direct, length: count)
        } else {
            try writeThroughPageCache(UnsafeRawBufferPointer(rebasing: buffers[current][..<count]), at: start)
        }
        moveToNextBuffer()
    }

    /// The buffer's `count` bytes are written or under way: the next buffer starts after them.
    private func moveToNextBuffer() {
        start += Int64(count)
        count = 0
        capacity = nextCapacity()
    }

    /// Starts writing the current buffer's first `length` bytes at `start`, and moves on to the
    /// other buffer.
    private func startDirectWrite(on direct: DirectWriteChannel, length: Int) {
        cposix_streaming_fence()
        direct.startWrite(UnsafeRawBufferPointer(rebasing: buffers[current][..<length]), at: start)
        underWay = (start, length, current)
        current ^= 1
    }

    /// Waits for the direct write under way, if any. A write cut short is finished through the
    /// page cache, as is one the file system refused direct (EINVAL), and every later one too.
    private func finishWriteUnderWay() throws(Errno) {
        guard let write = underWay, let direct else { return }
        underWay = nil
        let bytes = UnsafeRawBufferPointer(rebasing: buffers[write.buffer][..<write.length])
        do {
            let written = try direct.waitForWrite()
            bytesInFile = write.offset + Int64(written)
            if written < write.length {
                try writeThroughPageCache(UnsafeRawBufferPointer(rebasing: bytes[written...]), at: bytesInFile)
            }
        } catch where error.code == EINVAL {
            self.direct = nil
            try writeThroughPageCache(bytes, at: write.offset)
        } catch {
            throw fail(error)
        }
    }

    /// Writes `bytes` at `offset` (the end of the bytes in the file) through the page cache,
    /// starting writeback every `writebackInterval` bytes (when not writing direct: then only
    /// a few blocks go this way).
    private func writeThroughPageCache(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        do {
            try file.writeAll(bytes, at: offset)
        } catch {
            throw fail(error)
        }
        bytesInFile = offset + Int64(bytes.count)
        if direct == nil && bytesInFile - writebackStart >= Self.writebackInterval {
            file.startWriteback(from: writebackStart, length: bytesInFile - writebackStart)
            writebackStart = bytesInFile
        }
    }

    /// Writes a piece that needs no buffer, at `start`.
    private func writeThroughPageCache(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        try writeThroughPageCache(bytes, at: start)
        start += Int64(bytes.count)
    }

    private func fail(_ error: Errno) -> Errno {
        failure = error
        return error
    }
}
