internal import Glibc
import TransferLogging
import TransferPOSIX

/// Why a file of root certificates installs none (`DeviceRootsFile`): logged, category
/// `trust`, with its typed fact; the daemon goes on without those roots. A value.
struct DeviceRootsRefusal: Error, CustomStringConvertible {
    enum Reason: Equatable {
        /// Not read: a symlink, not a regular file, past 1 MiB, or not opened.
        case unreadable(Errno)
        /// Owned by a user who may not install roots (`accepted` may).
        case owner(accepted: [uid_t])
        /// Its group or others may write it.
        case writableByOthers
        /// It has more than one name.
        case links
    }

    let path: String
    let reason: Reason
    /// What the open file was (`fstat`); nil when it was not opened.
    let status: stat?

    var description: String {
        let facts = status.map {
            " (owner uid \($0.st_uid), mode \(String($0.st_mode & 0o7777, radix: 8)), \($0.st_nlink) links)"
        } ?? ""
        switch reason {
        case .unreadable(let error): return "\(error)"
        case .owner(let accepted):
            let who = accepted.map { $0 == 0 ? "root" : "uid \($0)" }.joined(separator: " or ")
            return "\(path) is not owned by \(who)\(facts): a device-wide root is the administrator's to install"
        case .writableByOthers: return "\(path) may be written by its group or others\(facts)"
        case .links: return "\(path) has another name (a hard link)\(facts)"
        }
    }

    /// The typed fact of the log line (`LogEvent.deviceRootsRefused`).
    var event: LogEvent {
        let kind: LogEvent.RootsRefusal.Reason
        var code: Int?
        switch reason {
        case .unreadable(let error):
            kind = .unreadable
            code = Int(error.code)
        case .owner: kind = .owner
        case .writableByOthers: kind = .writableByOthers
        case .links: kind = .links
        }
        let refusal = LogEvent.RootsRefusal(kind, path: path, owner: status.map { UInt32($0.st_uid) },
                                            mode: status.map { UInt32($0.st_mode & 0o7777) },
                                            links: status.map { Int(clamping: $0.st_nlink) })
        return LogEvent(.deviceRootsRefused, code: code, rootsRefusal: refusal)
    }
}
