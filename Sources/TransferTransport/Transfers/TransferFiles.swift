internal import Glibc
import TransferPOSIX
import TransferContainer

/// Opens the files a transfer writes or reads besides the one it was given: through the
/// container's root when the daemon gives one (no symlink anywhere on the way, nothing
/// outside it), else by path, never through a symlink at the end (a default session's
/// files, in the process's own folders). Stateless; any thread.
enum TransferFiles {
    static func open(_ path: String, _ flags: Int32, root: RootDirectory?) throws(Errno) -> FileDescriptor {
        if let root { return try root.open(path, flags) }
        return try FileDescriptor.open(path, flags | O_NOFOLLOW)
    }
}
