import Foundation
import TransferContainer
import TransferPOSIX

/// What the daemon asks of the container's disk before it accepts a change: a new task may
/// not eat into the free-space reserve (`transferd --free-space-reserve`), so that the lines
/// that end running tasks and record their events still fit; and while commits fail, no
/// change is accepted at all (it could not be made durable, and its answer would wait for
/// the disk). A value; used on the daemon's loop thread.
struct JournalReserve {
    /// Bytes kept free for the journals' lines about tasks already accepted.
    let reserve: Int64

    /// What a new task's lines may take before it ends: its creation, the checkpoints
    /// between commits, and the event that ends it (a task record is a few KiB at most; an
    /// upload's response body can be more, and comes out of the reserve).
    static let newTaskAllowance: Int64 = 64 << 10

    init(reserve: Int64) {
        self.reserve = max(0, reserve)
    }

    /// Why a new task of the session whose journal is `journal` is refused, when `available`
    /// bytes are free on its file system; nil when it may be accepted (or the free space is
    /// unknown: the commit then has the last word).
    func refusalOfNewTask(available: Int64?, journal: String) -> TransferFailure? {
        guard let available, available - Self.newTaskAllowance < reserve else { return nil }
        return Self.outOfSpace(journal, "\(available) bytes free on the container's file system, \(reserve) kept in reserve for the lines that end the tasks already accepted")
    }

    /// Why a change to `path` (the journal or folder it would go to) cannot be recorded
    /// while writes to the container fail with `error`: a request refused while commits
    /// fail, or a new session whose folder could not be written. The error's own path is
    /// left out: it may be another app's session.
    static func cannotRecord(_ error: Errno, writing path: String) -> TransferFailure {
        guard error.code == ENOSPC || error.code == EDQUOT else {
            return TransferFailure(code: TransferFailure.cannotWriteToFile, message: "cannot record the change in \(path): the daemon's writes to the container fail (\(Errno(error.code, error.operation))); try again later", subject: path)
        }
        return outOfSpace(path, "the file system is full")
    }

    /// The out-of-space refusal: Apple's -3003 (`NSURLErrorCannotWriteToFile`), with Foundation's
    /// name for the cause (`NSFileWriteOutOfSpaceError`) and the path that cannot grow.
    private static func outOfSpace(_ path: String, _ detail: String) -> TransferFailure {
        TransferFailure(code: TransferFailure.cannotWriteToFile,
                        message: "not enough space to record the change in \(path) (NSFileWriteOutOfSpaceError): \(detail)",
                        subject: path)
    }

    /// Free bytes for unprivileged writers on the file system holding `path`; nil if unknown.
    static func availableSpace(at path: String) -> Int64? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        let (bytes, overflow) = UInt64(stats.f_bavail).multipliedReportingOverflow(by: UInt64(stats.f_frsize))
        return overflow || bytes > UInt64(Int64.max) ? Int64.max : Int64(bytes)
    }
}
