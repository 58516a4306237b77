#if canImport(Glibc)
import Glibc
#endif
import Foundation

extension RootDirectory {
    /// Replaces the file at `absolute` with `data` as `DurableFile.write` does (a temporary
    /// file beside it, synced, renamed over it, the folder synced), every step below the root
    /// without following a symlink: one planted in the file's place is replaced, not written
    /// through, and one on the way fails with `ELOOP`.
    public func write(_ data: Data, to absolute: String) throws(Errno) {
        let folder = (absolute as NSString).deletingLastPathComponent
        // Unique per write, made with O_EXCL: never an existing file, nor a link planted in its place.
        let temporary = "\(folder)/.\((absolute as NSString).lastPathComponent).\(getpid()).\(UUID().uuidString.prefix(8)).tmp"
        let fd = try open(temporary, O_WRONLY | O_CREAT | O_EXCL)
        do {
            try fd.writeAll(data)
            try fd.sync()
        } catch {
            fd.close()
            try? remove(temporary)
            throw error
        }
        fd.close()
        do { try rename(temporary, to: absolute) } catch {
            try? remove(temporary)
            throw error
        }
        let directory = try openDirectory(folder)
        defer { directory.close() }
        try directory.sync()
    }
}
