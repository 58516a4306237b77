#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Crash-safe file writes: temporary file, fsync, rename, fsync of the directory.
///
/// After `write` returns, the new contents survive a `SIGKILL` or a power cut; before it
/// returns, readers see the old contents or none, never a torn file. Stateless.
public enum DurableFile {
    /// Replaces `path` with `data` atomically and durably (mode 0600). With `sync` false the
    /// replacement is still atomic and survives the writer's death, but not a power cut.
    public static func write(_ data: Data, to path: String, syncDirectory: Bool = true, sync: Bool = true) throws(Errno) {
        let directory = (path as NSString).deletingLastPathComponent
        // Unique per write: two threads writing the same record must not share a temporary file.
        let temporary = "\(directory)/.\((path as NSString).lastPathComponent).\(getpid()).\(UUID().uuidString.prefix(8)).tmp"
        let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try fd.writeAll(data)
            if sync { try fd.sync() }
        } catch {
            fd.close()
            unlink(temporary)
            throw error
        }
        fd.close()
        guard rename(temporary, path) == 0 else {
            let error = Errno.current("rename", path: path)
            unlink(temporary)
            throw error
        }
        if syncDirectory && sync { try Self.syncDirectory(directory) }
    }

    /// Makes a rename or unlink inside `directory` durable.
    public static func syncDirectory(_ directory: String) throws(Errno) {
        let fd = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY)
        defer { fd.close() }
        try fd.sync()
    }

    /// Removes a file durably; a missing file is not an error.
    public static func remove(_ path: String, syncDirectory: Bool = true) throws(Errno) {
        if unlink(path) != 0 && errno != ENOENT { throw .current("unlink", path: path) }
        if syncDirectory { try Self.syncDirectory((path as NSString).deletingLastPathComponent) }
    }

    /// Creates a directory and its parents with mode 0700 (the container is private to the user).
    /// Each directory made is durable when this returns: its parent is synced, since a power
    /// cut otherwise forgets the new name, and with it everything made inside since.
    public static func makeDirectory(_ path: String) throws(Errno) {
        var existing = stat()
        if stat(path, &existing) == 0, existing.st_mode & S_IFMT == S_IFDIR { return } // the usual case: one stat
        var partial = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            let parent = partial.isEmpty ? "/" : partial
            partial += "/" + component
            if mkdir(partial, 0o700) != 0 {
                guard errno == EEXIST else { throw .current("mkdir", path: partial) }
                var st = stat()
                guard stat(partial, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { throw Errno(ENOTDIR, "mkdir", path: partial) }
            } else {
                try syncDirectory(parent)
            }
        }
    }
}
