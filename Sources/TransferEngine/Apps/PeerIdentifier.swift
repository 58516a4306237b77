internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// Tells who a connected process is by the kernel's word, not by its own: the pid from
/// `SO_PEERCRED`, the executable behind that pid (`/proc/<pid>/exe`), and the bundles that
/// executable's entitlements declare (see `Entitlements`). Declarations are read once per
/// executable file (device, inode, size, mtime). Owned by the event loop.
final class PeerIdentifier {
    /// A process as the kernel and its executable describe it.
    struct Peer {
        let pid: Int32
        /// The file the process executes (`/proc/<pid>/exe`); relaunches use this path.
        let executablePath: String
        let entitled: [AppIdentity]
    }

    private struct FileKey: Hashable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: Int
    }

    private var declarations: [FileKey: [AppIdentity]] = [:]

    /// Identifies the process `pid`; throws a refusal when its executable cannot be read.
    func identify(pid: Int32) throws(TransferFailure) -> Peer {
        let exe = "/proc/\(pid)/exe"
        var st = stat()
        guard stat(exe, &st) == 0 else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "cannot identify process \(pid): \(Errno.current("stat", path: exe))", subject: "\(pid)")
        }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(exe, &buffer, buffer.count - 1)
        let path = length > 0 ? String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : exe
        let key = FileKey(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size), modified: Int(st.st_mtim.tv_sec) * 1_000_000_000 + Int(st.st_mtim.tv_nsec))
        if let known = declarations[key] {
            return Peer(pid: pid, executablePath: path, entitled: known)
        }
        var entitled: [AppIdentity]
        do { entitled = try Entitlements.identities(inExecutableAt: exe) } catch {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "cannot identify process \(pid): \(error)", subject: path)
        }
        // A plain program (no declaration) may be only itself: program.<its name>, no app groups.
        if entitled.isEmpty { entitled = [AppIdentity.program(executablePath: path)] }
        declarations[key] = entitled
        return Peer(pid: pid, executablePath: path, entitled: entitled)
    }
}
