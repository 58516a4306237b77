internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// A file of root certificates every app trusts without a challenge, and who may have made
/// it (WhoMayDoWhat.md). Installing such a root is the device administrator's act, as a
/// configuration profile is on iOS; within one user account the file system is no wall, so
/// the container's `Daemon/trusted-roots.pem` counts only when root owns it (the one owner a
/// program of the user cannot forge), no group or other may write it, and it has one name
/// (a hard link to a root-owned file elsewhere is nobody's act). The file
/// `transferd --trusted-roots` names was given by whoever started the daemon: it may be
/// the daemon's own user's too. All is judged on the descriptor the bytes are read from.
/// A value; any thread.
struct DeviceRootsFile {
    let path: String
    /// The uids that may own it.
    let owners: [uid_t]
    /// Whether a second name (a hard link) refuses it.
    let needsOneLink: Bool
    /// The container's walls it is read through (no symlink on the way); nil for a file named
    /// on the command line, whose last component only may not be a symlink.
    let root: RootDirectory?

    /// `Daemon/trusted-roots.pem` of the container.
    static func container(_ layout: ContainerLayout, root: RootDirectory) -> DeviceRootsFile {
        DeviceRootsFile(path: layout.deviceTrustedRoots.path, owners: [0], needsOneLink: true, root: root)
    }

    /// The file `transferd --trusted-roots` names (an absolute path).
    static func option(_ path: String) -> DeviceRootsFile {
        DeviceRootsFile(path: path, owners: geteuid() == 0 ? [0] : [0, geteuid()], needsOneLink: false, root: nil)
    }

    /// Whether the file came from the command line (its absence is then worth a word).
    var isOption: Bool { root == nil }

    /// The file's bytes when they may install roots; nil when there is no file there. Who
    /// made it is judged before any byte is read.
    func read() throws(DeviceRootsRefusal) -> Data? {
        let fd: FileDescriptor, status: stat
        do throws(Errno) {
            if let root {
                fd = try root.open(path, O_RDONLY | O_NONBLOCK)
            } else {
                fd = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW)
            }
        } catch {
            if error.code == ENOENT { return nil }
            throw DeviceRootsRefusal(path: path, reason: .unreadable(error), status: nil)
        }
        defer { fd.close() }
        do { status = try fd.status() } catch {
            throw DeviceRootsRefusal(path: path, reason: .unreadable(error), status: nil)
        }
        if let reason = refusal(of: status) { throw DeviceRootsRefusal(path: path, reason: reason, status: status) }
        do { return try fd.readRegularFile(limit: StateFileLimits.trustedRoots, path: path) } catch {
            throw DeviceRootsRefusal(path: path, reason: .unreadable(error), status: status)
        }
    }

    /// Why a file that is `status` may not install roots; nil when it may.
    func refusal(of status: stat) -> DeviceRootsRefusal.Reason? {
        if !owners.contains(status.st_uid) { return .owner(accepted: owners) }
        if status.st_mode & 0o022 != 0 { return .writableByOthers }
        if needsOneLink && status.st_nlink != 1 { return .links }
        return nil
    }
}
