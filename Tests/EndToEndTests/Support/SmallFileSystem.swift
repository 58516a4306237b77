import Foundation
import Glibc

/// A small tmpfs mounted over a test's container, so that a test can fill the container's
/// disk without filling the machine's. Mounted and unmounted on the test's thread.
///
/// Why tmpfs and not `powercutfs` with a byte budget: the kernel's own file system reports
/// ENOSPC and `statvfs` exactly as a full disk does, with nothing to build, and the power-cut
/// file system stays about power cuts. It needs the right to mount (root, as here and on CI);
/// where that is missing the tests that use it are skipped with `unavailableReason`.
final class SmallFileSystem {
    let mountPoint: String
    private var mounted = true

    /// Mounts a tmpfs of `size` bytes at `mountPoint` (an existing folder, whose contents it hides).
    init(mountedAt mountPoint: String, size: Int) throws {
        self.mountPoint = mountPoint
        guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=\(size),mode=0700") == 0 else {
            throw TestFailure("cannot mount a tmpfs at \(mountPoint): \(String(cString: strerror(errno)))")
        }
    }

    /// Detaches the file system even while processes still hold files in it (MNT_DETACH);
    /// its memory goes with the last of them.
    func unmount() {
        guard mounted else { return }
        mounted = false
        umount2(mountPoint, Int32(MNT_DETACH))
    }

    deinit { unmount() }

    /// Bytes a process without privileges may still write (`f_bavail`).
    var availableBytes: Int64 {
        var stats = statvfs()
        guard statvfs(mountPoint, &stats) == 0 else { return -1 }
        return Int64(stats.f_bavail) * Int64(stats.f_frsize)
    }

    /// Writes `path` until the file system refuses (ENOSPC), in ever smaller pieces so that
    /// not a block is left; returns the bytes written.
    @discardableResult
    static func fill(_ path: String) throws -> Int64 {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw TestFailure("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var written: Int64 = 0
        var piece = 1 << 20
        let zeros = [UInt8](repeating: 0, count: piece)
        while piece > 0 {
            let n = zeros.withUnsafeBytes { write(fd, $0.baseAddress, piece) }
            if n > 0 { written += Int64(n); continue }
            guard n < 0, errno == ENOSPC || errno == EINTR else { throw TestFailure("writing \(path): \(String(cString: strerror(errno)))") }
            if errno == ENOSPC { piece /= 2 }
        }
        return written
    }

    /// Why the tests that need it cannot run here, or nil when a tmpfs can be mounted.
    static let unavailableReason: String? = {
        let probe = "/tmp/bgt-mount-probe-\(getpid())"
        mkdir(probe, 0o700)
        defer { rmdir(probe) }
        guard mount("tmpfs", probe, "tmpfs", 0, "size=1m") == 0 else {
            return "cannot mount a tmpfs (\(String(cString: strerror(errno)))): the full-disk test needs the right to mount"
        }
        umount2(probe, Int32(MNT_DETACH))
        return nil
    }()
}
