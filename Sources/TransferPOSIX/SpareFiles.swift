#if canImport(Glibc)
import Glibc
#endif
import CPOSIX
import Foundation

/// Empty files made ahead of need, on a thread of its own: a download then starts by giving
/// a spare its partial file's name instead of creating that file.
///
/// Creating a file is the costly part on some file systems (ext4 without a journal looks
/// past every inode freed in the last minutes for each new one), and it would otherwise
/// hold up the daemon's loop, which may have thousands of small downloads to start. The
/// spares have no name (`O_TMPFILE`): making one locks no folder the loop renames in, and a
/// daemon killed with spares ready leaves nothing behind.
///
/// `want`, `take` and `stop` are called from the daemon's loop; the worker thread makes and
/// closes the files. What they share is behind one lock.
public final class SpareFiles: @unchecked Sendable {
    /// Where the spares are made; they can be named anywhere on the same file system.
    public let directory: String
    private let condition = NSCondition()
    private var ready: [FileDescriptor] = []
    private var wanted = 0
    private var stopping = false
    private var started = false
    /// Set when the file system cannot make or name unnamed files: no more are made.
    private var unsupported = false

    public init(directory: String) {
        self.directory = directory
    }

    /// Asks for `count` spares to be kept ready (0: the ones made are closed).
    public func want(_ count: Int) {
        condition.lock()
        defer { condition.unlock() }
        guard count != wanted, !unsupported else { return }
        wanted = count
        if !started {
            started = true
            let thread = Thread { [self] in work() }
            thread.name = "spare files"
            thread.qualityOfService = .utility
            thread.start()
        }
        condition.signal()
    }

    /// Spares made and not yet taken.
    public var readyCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return ready.count
    }

    /// Names a spare `path`, which must not exist yet, and returns it open for writing at
    /// offset 0. Nil when no spare is ready or `path` exists: the caller then opens or
    /// creates the file itself.
    public func take(to path: String) -> FileDescriptor? {
        take { spare in cposix_link_unnamed(spare.rawValue, path) == 0 ? 0 : errno }
    }

    /// Names a spare `name` in the folder open as `folder`: the folder as opened, whatever its
    /// path names by now. Nil as for `take(to:)`.
    public func take(as name: String, in folder: FileDescriptor) -> FileDescriptor? {
        take { spare in
            do throws(Errno) { try spare.link(as: name, in: folder) } catch { return error.code }
            return 0
        }
    }

    /// Takes a spare and names it with `link`, which returns 0 or the error number.
    private func take(linking link: (FileDescriptor) -> Int32) -> FileDescriptor? {
        condition.lock()
        let spare = ready.popLast()
        condition.unlock()
        guard let spare else { return nil }
        let error = link(spare)
        let linked = error == 0
        condition.lock()
        defer { condition.unlock() }
        if linked {
            condition.signal() // make another
            return spare
        }
        if error == EEXIST {
            ready.append(spare) // still a spare
        } else {
            spare.close() // another file system, or no /proc: make no more
            unsupported = true
            wanted = 0
            condition.signal()
        }
        return nil
    }

    /// Stops the worker, which closes the spares not taken.
    public func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func work() {
        condition.lock()
        defer {
            for spare in ready { spare.close() }
            ready = []
            condition.unlock()
        }
        while !stopping {
            if ready.count > wanted {
                ready.removeLast().close()
            } else if ready.count < wanted {
                condition.unlock()
                let fd = cposix_open_unnamed(directory)
                let error = errno
                condition.lock()
                if fd >= 0 {
                    ready.append(FileDescriptor(rawValue: fd))
                } else if error == EOPNOTSUPP || error == EISDIR || error == EINVAL {
                    unsupported = true // no O_TMPFILE here
                    wanted = 0
                } else {
                    wanted = ready.count // cannot now (full, gone): until asked again
                }
            } else {
                condition.wait()
            }
        }
    }
}
