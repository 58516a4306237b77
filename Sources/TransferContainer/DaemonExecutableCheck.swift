#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The rule for a daemon executable a process names itself (`BGTRANSFER_TRANSFERD`) or finds
/// through `PATH`: the first client's choice serves every app of the container, so it must be
/// a binary that only the user (or root) could have put there. Stateless.
public enum DaemonExecutableCheck {
    /// Why `path` may not be the daemon, or nil when it may: it must be absolute, a regular
    /// executable file (after symbolic links) owned by this user or root, and neither the file
    /// nor its folder writable by group or others.
    public static func refusal(of path: String) -> String? {
        guard path.hasPrefix("/") else { return "it is not an absolute path" }
        guard let real = realpath(path, nil) else { return "it does not exist (\(String(cString: strerror(errno))))" }
        let resolved = String(cString: real)
        free(real)
        var file = stat()
        guard stat(resolved, &file) == 0 else { return "it cannot be examined (\(String(cString: strerror(errno))))" }
        guard file.st_mode & S_IFMT == S_IFREG else { return "it is not a regular file" }
        guard access(resolved, X_OK) == 0 else { return "it is not executable" }
        let me = getuid()
        guard file.st_uid == me || file.st_uid == 0 else { return "it is owned by uid \(file.st_uid), neither this user (\(me)) nor root" }
        guard file.st_mode & 0o022 == 0 else { return "it is writable by group or others (mode \(String(file.st_mode & 0o7777, radix: 8)))" }
        let folder = (resolved as NSString).deletingLastPathComponent
        var directory = stat()
        guard stat(folder, &directory) == 0 else { return "its folder \(folder) cannot be examined (\(String(cString: strerror(errno))))" }
        guard directory.st_uid == me || directory.st_uid == 0 else { return "its folder \(folder) is owned by uid \(directory.st_uid), neither this user (\(me)) nor root" }
        guard directory.st_mode & 0o022 == 0 else { return "its folder \(folder) is writable by group or others (mode \(String(directory.st_mode & 0o7777, radix: 8)))" }
        return nil
    }
}
