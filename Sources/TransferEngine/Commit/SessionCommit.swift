internal import Glibc
import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX

/// One session's changes since its last commit, as `DaemonSession.takeCommit` hands them to
/// the commit thread: what `perform` makes durable, in this order, because each step names
/// what the one before made: finished files, the folders they were named in, then the
/// journal lines that tell of them. Once the lines are on disk, finished downloads take
/// their final names (their events are durable now), and the files the client left behind
/// go (the acknowledgement among the lines).
struct SessionCommit: Sendable {
    let session: SessionKey
    let files: [(FileDescriptor, path: String)]
    let directories: Set<String>
    let journal: JournalWrite?
    let filesToRename: [FileRename]
    let filesToRemove: [String]

    /// Runs on the commit thread. A finished file that cannot be synced is logged, not
    /// retried: its descriptor is closed either way. A folder or the journal that cannot be
    /// synced fails the commit, and the session takes it back (`commitFailed`). Renames that
    /// fail once the lines are on disk (a full disk can refuse a new name) are returned: the
    /// lines stay, and the renames are tried again with the next commit, what tells of their
    /// events waiting until then (`DaemonSession.renameAgain`).
    @discardableResult
    func perform(log: TransferLog, root: RootDirectory) throws(Errno) -> RenamesLeft? {
        // Every file's writeback first, so that the disk has them all at once.
        for (file, _) in files { file.startWriteback(from: 0, length: 0) }
        for (file, path) in files {
            do { try file.sync() } catch {
                log.error("store", "cannot sync finished file \(path): \(error)", session: session.identifier.rawValue)
            }
            file.close()
        }
        for directory in directories { try DurableFile.syncDirectory(directory) }
        try journal?.perform()
        // Not made durable here: after a power cut the session, loaded again, renames what
        // the cut took back (`DaemonSession.nameFinishedDownloads`).
        var left: RenamesLeft?
        for (rename, error) in zip(filesToRename, root.rename(filesToRename.map { ($0.from, $0.to) })) {
            guard let error else { continue }
            if error.code == ENOENT {
                // The body is gone: renamed already, or nothing is left to rename (not waited for).
                if (try? root.status(rename.to)) == nil {
                    log.error("store", "the finished download \(rename.from) is gone before it took its name \(rename.to)", session: session.identifier.rawValue,
                              event: LogEvent(.finishedFileGone))
                }
                continue
            }
            left = RenamesLeft(renames: (left?.renames ?? []) + [rename], error: left?.error ?? error)
        }
        // From the container's root: a folder swapped for a symlink removes nothing elsewhere.
        _ = root.remove(filesToRemove)
        return left
    }
}

/// Renames a commit could not make after its lines were on disk, and the first one's error.
struct RenamesLeft: Sendable {
    let renames: [FileRename]
    let error: Errno
}

/// A finished download's body and the name it takes once its completion event is durable.
struct FileRename: Sendable, Equatable {
    let from: String
    let to: String
}
