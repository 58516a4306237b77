import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX

/// One session's changes since its last commit, as `DaemonSession.takeCommit` hands them to
/// the commit thread: what `perform` makes durable, in this order, because each step names
/// what the one before made: finished files, the folders they were named in, then the
/// journal lines that tell of them. Files the client left behind go once the lines (the
/// acknowledgement among them) are on disk.
struct SessionCommit: Sendable {
    let session: SessionKey
    let files: [(FileDescriptor, path: String)]
    let directories: Set<String>
    let journal: JournalWrite?
    let filesToRemove: [String]

    /// Runs on the commit thread. A finished file that cannot be synced is logged, not
    /// retried: its descriptor is closed either way. A folder or the journal that cannot be
    /// synced fails the commit, and the session takes it back (`commitFailed`).
    func perform(log: TransferLog, root: RootDirectory) throws(Errno) {
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
        // From the container's root: a folder swapped for a symlink removes nothing elsewhere.
        filesToRemove.forEach { try? root.remove($0) }
    }
}
