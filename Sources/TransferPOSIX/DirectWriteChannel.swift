#if canImport(Glibc)
import Glibc
#endif
import Foundation
import CPOSIX

/// A file opened a second time for writes that bypass the page cache (`O_DIRECT`), each made
/// on a thread of its own while the caller goes on: the bytes go from the caller's buffer to
/// the disk, and the caller fills its next buffer meanwhile. One write is under way at a time.
///
/// A thread of its own, not Linux's native AIO (`io_submit` of a direct write to ext4 returned
/// only once the write had ended on this project's machines, so it overlapped nothing), nor a
/// dispatch queue (a write blocks its thread for as long as the disk takes, which is no work
/// for the shared pool's threads, and a thread that cannot be started is reported here).
///
/// Each write's buffer address, file offset and length must be multiples of `alignment`.
/// A write ends on the device, not durably: the file's `fdatasync` still makes it so.
///
/// Owned by one writer on one thread (a download's `BodyFileWriter`, on the daemon's loop
/// thread); the write itself runs on the channel's thread, which ends with the channel.
public final class DirectWriteChannel {
    /// The alignment of buffers, offsets and lengths: the page size, a multiple of every
    /// logical block size Linux supports.
    public static let alignment = 4096

    private let handoff: Handoff
    /// Whether a write was started and its end not yet taken.
    public private(set) var isWriting = false

    /// Opens the file open as `file` again, for direct writes (through `/proc/self/fd`, so it
    /// is that very file, whatever its name now), and starts the thread that writes. Throws
    /// when the file system refuses `O_DIRECT` (EINVAL: tmpfs before Linux 6.6, some FUSE file
    /// systems), when no descriptor or thread is left: the caller writes through the page
    /// cache instead.
    public init(reopening file: FileDescriptor) throws(Errno) {
        let fd = cposix_open_direct(file.rawValue)
        guard fd >= 0 else { throw .current("open O_DIRECT") }
        handoff = Handoff(descriptor: FileDescriptor(rawValue: fd))
        do {
            try Self.startThread(serving: handoff)
        } catch {
            handoff.descriptor.close()
            throw error
        }
    }

    /// Starts the writing thread (`pthread_create`, detached): a system out of threads
    /// (EAGAIN) throws, and the caller writes through the page cache, rather than wait for
    /// ever on a thread that never ran.
    private static func startThread(serving handoff: Handoff) throws(Errno) {
        let context = Unmanaged.passRetained(handoff).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<Handoff>.fromOpaque(raw).takeRetainedValue().serve()
            return nil
        }, context)
        guard status == 0 else {
            Unmanaged<Handoff>.fromOpaque(context).release()
            throw Errno(status, "pthread_create")
        }
        pthread_detach(thread)
    }

    /// Starts writing `bytes` at `offset`. The bytes must stay untouched until
    /// `waitForWrite()` has returned.
    public func startWrite(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        precondition(!isWriting, "one direct write at a time")
        isWriting = true
        handoff.post(Handoff.Write(bytes: bytes, offset: offset))
    }

    /// Waits for the write under way to end; returns the bytes it wrote (fewer than asked
    /// only when the device stopped short), or throws its error. EINVAL means the file system
    /// refused this write direct: write it another way.
    public func waitForWrite() throws(Errno) -> Int {
        precondition(isWriting, "no direct write under way")
        isWriting = false
        return try handoff.takeResult().get()
    }

    deinit {
        // A write still under way uses its buffer, which the owner frees after this.
        if isWriting { _ = handoff.takeResult() }
        handoff.stop()
        handoff.descriptor.close()
    }

    /// What the owner's thread and the writing thread share: the direct descriptor, and the
    /// write and its result behind one condition (a mutex and a condition variable: both
    /// threads sleep while they wait, neither spins). The channel closes the descriptor once
    /// the thread is told to stop with no write under way.
    private final class Handoff: @unchecked Sendable {
        struct Write: @unchecked Sendable {
            let bytes: UnsafeRawBufferPointer
            let offset: Int64
        }
        let descriptor: FileDescriptor
        private let condition = NSCondition()
        private var write: Write?
        private var result: Result<Int, Errno>?
        private var stopping = false

        init(descriptor: FileDescriptor) { self.descriptor = descriptor }

        func post(_ write: Write) {
            condition.withLock {
                self.write = write
                condition.broadcast()
            }
        }

        func takeResult() -> Result<Int, Errno> {
            condition.withLock {
                while result == nil { condition.wait() }
                defer { result = nil }
                return result ?? .success(0)
            }
        }

        func stop() {
            condition.withLock {
                stopping = true
                condition.broadcast()
            }
        }

        /// The writing thread: one `pwrite` for each write posted, until stopped.
        func serve() {
            while true {
                let next: Write? = condition.withLock {
                    while write == nil && !stopping { condition.wait() }
                    defer { write = nil }
                    return write
                }
                guard let next else { return }
                let outcome: Result<Int, Errno>
                do {
                    outcome = .success(try descriptor.writeOnce(next.bytes, at: next.offset))
                } catch {
                    outcome = .failure(error)
                }
                condition.withLock {
                    result = outcome
                    condition.broadcast()
                }
            }
        }
    }
}
