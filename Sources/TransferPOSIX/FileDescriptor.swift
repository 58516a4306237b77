#if canImport(Glibc)
import Glibc
#endif
import Foundation
import CPOSIX

/// An owned file descriptor: a typed handle around the raw `Int32`, closed explicitly.
///
/// Not thread-safe by itself; each owner keeps it on one thread or behind its own lock.
public struct FileDescriptor: Hashable, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Opens `path` with the given flags; new files get `mode` (0600 by default: the container is private).
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(Errno) -> FileDescriptor {
        let fd = retryingOnInterrupt { Glibc.open(path, flags | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw .current("open", path: path) }
        return FileDescriptor(rawValue: fd)
    }

    /// Opens the directory at `path` to open files relative to it; refuses (`ELOOP`) when
    /// its last component is a symlink, so that a folder swapped for a link to elsewhere is
    /// never written through.
    public static func openDirectory(_ path: String) throws(Errno) -> FileDescriptor {
        try open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    }

    /// Opens `name`, one component, in this directory (`openat`) without following a
    /// symlink there (`ELOOP`): a client cannot point the daemon at a file elsewhere.
    public func openBeneath(_ name: String, _ flags: Int32, mode: mode_t = 0o600) throws(Errno) -> FileDescriptor {
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else { throw Errno(EINVAL, "openat", path: name) }
        let fd = retryingOnInterrupt { Glibc.openat(rawValue, name, flags | O_CLOEXEC | O_NOFOLLOW, mode) }
        guard fd >= 0 else { throw .current("openat", path: name) }
        return FileDescriptor(rawValue: fd)
    }

    /// Gives the open file the name `name` in the directory `folder` (`linkat` through
    /// /proc/self/fd, which needs no privilege): the file linked is the one checked on this
    /// descriptor, whatever its old name points at by now.
    public func link(as name: String, in folder: FileDescriptor) throws(Errno) {
        let source = "/proc/self/fd/\(rawValue)"
        guard Glibc.linkat(AT_FDCWD, source, folder.rawValue, name, AT_SYMLINK_FOLLOW) == 0 else { throw .current("linkat", path: name) }
    }

    /// What the file open here is (`fstat`): checked on the descriptor, not on a path that
    /// may name another file by the time it is opened.
    public func status() throws(Errno) -> stat {
        var st = stat()
        guard fstat(rawValue, &st) == 0 else { throw .current("fstat") }
        return st
    }

    public func close() {
        _ = Glibc.close(rawValue)
    }

    /// Reads up to `buffer.count` bytes; 0 means end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        let n = retryingOnInterrupt { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
        guard n >= 0 else { throw .current("read") }
        return n
    }

    /// Reads up to `buffer.count` bytes from `offset` (`pread`), looping over short reads;
    /// fewer only at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        var filled = 0
        while filled < buffer.count {
            let n = retryingOnInterrupt { Glibc.pread(rawValue, buffer.baseAddress.map { $0 + filled }, buffer.count - filled, off_t(offset) + off_t(filled)) }
            guard n >= 0 else { throw .current("pread") }
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// Writes every byte, looping over short writes.
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let n = retryingOnInterrupt { Glibc.write(rawValue, bytes.baseAddress! + offset, bytes.count - offset) }
            guard n >= 0 else { throw .current("write") }
            offset += n
        }
    }

    /// One `pwrite` of `bytes` at `offset`, retried on EINTR: the bytes it wrote, which may
    /// be fewer than asked.
    public func writeOnce(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        let n = retryingOnInterrupt { Glibc.pwrite(rawValue, base, bytes.count, off_t(offset)) }
        guard n >= 0 else { throw .current("pwrite") }
        return n
    }

    /// Writes every byte at `offset` (`pwrite`), looping over short writes; the descriptor's
    /// own offset does not move.
    public func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        var done = 0
        while done < bytes.count {
            let n = try writeOnce(UnsafeRawBufferPointer(rebasing: bytes[done...]), at: offset + Int64(done))
            guard n > 0 else { throw Errno(EIO, "pwrite") }
            done += n
        }
    }

    public func writeAll(_ data: Data) throws(Errno) {
        let result = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Errno? in
            do { try writeAll(raw) } catch let error as Errno { return error } catch { return Errno(EIO, "write") }
            return nil
        }
        if let result { throw result }
    }

    /// Reads the whole file from the current offset.
    public func readToEnd(limit: Int = 64 << 20) throws(Errno) -> Data {
        var result = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = try chunk.withUnsafeMutableBytes { raw -> Result<Int, Errno> in
                do { return .success(try read(into: raw)) } catch let error as Errno { return .failure(error) } catch { return .failure(Errno(EIO, "read")) }
            }.get()
            if n == 0 { return result }
            result.append(contentsOf: chunk[0..<n])
            if result.count > limit { throw Errno(EFBIG, "read") }
        }
    }

    /// Starts writing `length` bytes from `offset` to disk in the background, without waiting:
    /// a large file written this way as it grows costs little to `sync()` at the end.
    public func startWriteback(from offset: Int64, length: Int64) {
        _ = cposix_start_writeback(rawValue, offset, length)
    }

    /// Allocates the disk blocks for `length` bytes from `offset` ahead of the writes that fill
    /// them, leaving the file's size as it is: writes into allocated blocks cost the kernel
    /// less than writes that allocate as they go (ext4's delayed allocation). A file system
    /// without it (EOPNOTSUPP) throws, as does a full one; the caller may carry on without.
    public func reserveBlocks(from offset: Int64, length: Int64) throws(Errno) {
        guard cposix_reserve_blocks(rawValue, offset, length) == 0 else { throw .current("fallocate") }
    }

    public func sync() throws(Errno) {
        guard fsync(rawValue) == 0 else { throw .current("fsync") }
    }

    public func truncate(to length: Int64) throws(Errno) {
        guard ftruncate(rawValue, off_t(length)) == 0 else { throw .current("ftruncate") }
    }

    @discardableResult
    public func seek(to offset: Int64) throws(Errno) -> Int64 {
        let r = lseek(rawValue, off_t(offset), SEEK_SET)
        guard r >= 0 else { throw .current("lseek") }
        return Int64(r)
    }

    /// Bytes an unprivileged writer may still write on this file's file system (`fstatvfs`:
    /// available blocks times their size).
    public func availableSpace() throws(Errno) -> Int64 {
        var st = statvfs()
        guard fstatvfs(rawValue, &st) == 0 else { throw .current("fstatvfs") }
        let blocks = UInt64(st.f_bavail), size = UInt64(st.f_frsize)
        let (bytes, overflow) = blocks.multipliedReportingOverflow(by: size)
        return overflow || bytes > UInt64(Int64.max) ? Int64.max : Int64(bytes)
    }

    public func size() throws(Errno) -> Int64 {
        var st = stat()
        guard fstat(rawValue, &st) == 0 else { throw .current("fstat") }
        return Int64(st.st_size)
    }

    public func setNonBlocking() {
        let flags = fcntl(rawValue, F_GETFL)
        _ = fcntl(rawValue, F_SETFL, flags | O_NONBLOCK)
    }
}
