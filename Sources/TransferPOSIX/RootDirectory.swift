#if canImport(Glibc)
import Glibc
#endif
import Foundation
import CPOSIX

/// A directory held open (the container's root) under which files are opened, made,
/// renamed, linked and removed by path without following any symlink on the way and
/// without leaving it (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): a program
/// that plants a link anywhere inside cannot point whoever works here at a file elsewhere.
///
/// Paths are given whole (as built from the root's path); one outside the root fails with
/// `EXDEV`, one through a symlink with `ELOOP`. The descriptor is opened once and never
/// closed; any thread may use it (each call opens and closes its own descriptors).
public struct RootDirectory: Sendable {
    /// The root as it was named, and as the kernel resolves it (they differ when a folder
    /// above the root is a symlink, e.g. a temporary folder); paths may start with either.
    public let path: String
    public let resolvedPath: String
    public let descriptor: FileDescriptor
    /// Tests only: open by walking one folder at a time, as on a kernel without `openat2`.
    var walks = false

    /// Opens the directory at `path`. The root itself may be reached through symlinks: it is
    /// the user's choice; only what lies below it is held to the walls.
    public static func open(_ path: String) throws(Errno) -> RootDirectory {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        let descriptor = try FileDescriptor.open(trimmed, O_RDONLY | O_DIRECTORY)
        var resolved = trimmed
        if let real = realpath(trimmed, nil) {
            resolved = String(cString: real)
            free(real)
        }
        return RootDirectory(path: trimmed, resolvedPath: resolved, descriptor: descriptor)
    }

    /// `absolute` relative to the root ("." for the root itself); `EXDEV` when it is not below it.
    public func relative(_ absolute: String) throws(Errno) -> String {
        for root in [path, resolvedPath] {
            if absolute == root { return "." }
            let prefix = root == "/" ? "/" : root + "/"
            if absolute.hasPrefix(prefix) {
                let rest = String(absolute.dropFirst(prefix.count))
                return rest.isEmpty ? "." : rest
            }
        }
        throw Errno(EXDEV, "open beneath \(path)", path: absolute)
    }

    /// Opens the file at `absolute` (new files get `mode`).
    public func open(_ absolute: String, _ flags: Int32, mode: mode_t = 0o600) throws(Errno) -> FileDescriptor {
        let name = try relative(absolute)
        let fd = walks ? cposix_open_beneath_walking(descriptor.rawValue, name, flags, mode) : cposix_open_beneath(descriptor.rawValue, name, flags, mode)
        guard fd >= 0 else { throw .current("open", path: absolute) }
        return FileDescriptor(rawValue: fd)
    }

    /// Opens the folder at `absolute` to work in it with `*at` calls.
    public func openDirectory(_ absolute: String) throws(Errno) -> FileDescriptor {
        try open(absolute, O_RDONLY | O_DIRECTORY)
    }

    /// Runs `body` with the folder holding `absolute`, open, and the last component's name.
    private func inParent<T>(of absolute: String, _ body: (FileDescriptor, String) throws(Errno) -> T) throws(Errno) -> T {
        let (folderPath, name) = try split(absolute)
        let folder = try openDirectory(folderPath)
        defer { folder.close() }
        return try body(folder, name)
    }

    /// The folder holding `absolute` and the last component's name; `EINVAL` for the root
    /// itself or a name that is no file's (empty, "." or "..").
    private func split(_ absolute: String) throws(Errno) -> (folder: String, name: String) {
        let name = PathText.lastComponent(of: absolute)
        guard !name.isEmpty, name != ".", name != "..", name != "/", try relative(absolute) != "." else { throw Errno(EINVAL, "open beneath", path: absolute) }
        return (PathText.folder(of: absolute), name)
    }

    /// What is at `absolute`, not following a symlink there (`fstatat`, `AT_SYMLINK_NOFOLLOW`).
    public func status(_ absolute: String) throws(Errno) -> stat {
        try inParent(of: absolute) { (folder, name) throws(Errno) in
            var st = stat()
            guard fstatat(folder.rawValue, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { throw .current("stat", path: absolute) }
            return st
        }
    }

    /// Creates the folder at `absolute` and its missing parents below the root (0700), each
    /// one made durable (its parent synced), as `DurableFile.makeDirectory` does by path.
    public func makeDirectory(_ absolute: String) throws(Errno) {
        try openMakingDirectory(absolute).close()
    }

    /// Opens the folder at `absolute` as `openDirectory` does, first making it and its
    /// missing parents as `makeDirectory` does when it is not there. One `openat2` when it
    /// is (the usual case, once per download started).
    public func openMakingDirectory(_ absolute: String) throws(Errno) -> FileDescriptor {
        if let existing = try? openDirectory(absolute) { return existing }
        let parts = try relative(absolute).split(separator: "/").map(String.init)
        var folder = try FileDescriptor(rawValue: descriptor.rawValue).reopened()
        defer { folder.close() }
        var made = path
        for part in parts {
            made += "/" + part
            if mkdirat(folder.rawValue, part, 0o700) == 0 {
                try folder.sync()
            } else if errno != EEXIST {
                throw .current("mkdir", path: made)
            }
            let next = cposix_open_beneath(folder.rawValue, part, O_RDONLY | O_DIRECTORY, 0)
            guard next >= 0 else { throw .current("open", path: made) }
            folder.close()
            folder = FileDescriptor(rawValue: next)
        }
        return try folder.reopened()
    }

    /// Removes the file at `absolute` (a symlink there is removed, not followed); a missing
    /// file is not an error.
    public func remove(_ absolute: String) throws(Errno) {
        if let error = remove([absolute]).first ?? nil { throw error }
    }

    /// Renames `source` to `destination`, both below the root.
    public func rename(_ source: String, to destination: String) throws(Errno) {
        if let error = rename([(source, destination)]).first ?? nil { throw error }
    }

    /// Renames each `from` to its `to`, all below the root, opening each folder involved
    /// once for the whole list (a commit's finished downloads mostly share one): the error of
    /// each rename, in order, nil for one made. Each is tried whatever the others did.
    public func rename(_ renames: [(from: String, to: String)]) -> [Errno?] {
        var folders = FolderBatch(root: self)
        defer { folders.close() }
        return renames.map { rename -> Errno? in
            do throws(Errno) {
                let (from, oldName) = try folders.parent(of: rename.from)
                let (to, newName) = try folders.parent(of: rename.to)
                guard renameat(from.rawValue, oldName, to.rawValue, newName) == 0 else { throw .current("rename", path: rename.from) }
                return nil
            } catch {
                return error
            }
        }
    }

    /// Removes each file of `paths` as `remove` does, opening each folder once for the whole
    /// list: the error of each, in order, nil for one removed or missing.
    public func remove(_ paths: [String]) -> [Errno?] {
        var folders = FolderBatch(root: self)
        defer { folders.close() }
        return paths.map { path -> Errno? in
            do throws(Errno) {
                let (folder, name) = try folders.parent(of: path)
                if unlinkat(folder.rawValue, name, 0) != 0 && errno != ENOENT { throw .current("unlink", path: path) }
                return nil
            } catch {
                return error
            }
        }
    }

    /// The folders one batch of calls works in, each opened from the root once (or its
    /// error kept), all closed by `close`. Owned by the call that makes it.
    private struct FolderBatch {
        let root: RootDirectory
        var opened: [String: Result<FileDescriptor, Errno>] = [:]

        /// The folder holding `absolute`, open, and the last component's name.
        mutating func parent(of absolute: String) throws(Errno) -> (FileDescriptor, String) {
            let (path, name) = try root.split(absolute)
            let folder = opened[path] ?? Result { () throws(Errno) in try root.openDirectory(path) }
            opened[path] = folder
            return (try folder.get(), name)
        }

        func close() {
            for case .success(let folder) in opened.values { folder.close() }
        }
    }

    /// Shortens (or lengthens) the file at `absolute` to `length` bytes.
    public func truncate(_ absolute: String, to length: Int64) throws(Errno) {
        let fd = try open(absolute, O_WRONLY | O_NONBLOCK)
        defer { fd.close() }
        try fd.truncate(to: length)
    }

    /// The names in the folder at `absolute`, without "." and "..".
    public func names(in absolute: String) throws(Errno) -> [String] {
        let fd = try openDirectory(absolute)
        guard let stream = fdopendir(fd.rawValue) else {
            let error = Errno.current("opendir", path: absolute)
            fd.close()
            throw error
        }
        defer { closedir(stream) } // closes fd too
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The contents of the regular file at `absolute`, refused (`EFBIG`) past `limit` bytes
    /// before any is read, and `EINVAL` when it is not a regular file (a FIFO would block).
    public func read(_ absolute: String, limit: Int) throws(Errno) -> Data {
        let fd = try open(absolute, O_RDONLY | O_NONBLOCK)
        defer { fd.close() }
        return try fd.readRegularFile(limit: limit, path: absolute)
    }
}

extension FileDescriptor {
    /// The whole regular file open here, refused (`EFBIG`) past `limit` bytes before any is
    /// read, and `EINVAL` when it is not a regular file (a FIFO would block); errors name `path`.
    public func readRegularFile(limit: Int, path: String) throws(Errno) -> Data {
        let st = try status()
        guard st.st_mode & S_IFMT == S_IFREG else { throw Errno(EINVAL, "read (not a regular file)", path: path) }
        guard st.st_size <= limit else {
            throw Errno(EFBIG, "read (\(st.st_size) bytes, more than \(limit))", path: path)
        }
        do { return try readToEnd(limit: limit) } catch { throw Errno(error.code, error.operation, path: path) }
    }

    /// Writes every byte of this file, from its start, to `other` at its current offset.
    public func copyAll(to other: FileDescriptor) throws(Errno) {
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { chunk.deallocate() }
        var offset: Int64 = 0
        while case let count = try read(into: chunk, at: offset), count > 0 {
            try other.writeAll(UnsafeRawBufferPointer(rebasing: chunk[0..<count]))
            offset += Int64(count)
        }
    }

    /// A second descriptor of the same open file (`dup`, close-on-exec), closed on its own.
    func reopened() throws(Errno) -> FileDescriptor {
        let fd = fcntl(rawValue, F_DUPFD_CLOEXEC, 0)
        guard fd >= 0 else { throw .current("dup") }
        return FileDescriptor(rawValue: fd)
    }
}
