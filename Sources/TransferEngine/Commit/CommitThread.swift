import Foundation
import TransferTransport
import TransferLogging
import TransferPOSIX

/// The daemon's commit thread: makes the sessions' changes durable while the event loop goes
/// on moving bytes, so that a slow flush of the disk holds up only the replies and pushes
/// that tell of those changes (group commit, pipelined: while one commit is on its way to
/// the disk, the next turns' changes gather for the one after).
///
/// One commit at a time. `start`, `takeOutcome` and `waitUntilDone` are called from the
/// event loop; the work runs on a serial queue, which wakes the loop when it is done. The
/// outcome is handed over behind one lock.
final class CommitThread: @unchecked Sendable {
    /// A commit's sessions, each with the error that failed it, if one did, or the renames
    /// left after its lines were on disk.
    typealias Outcome = [(commit: SessionCommit, error: Errno?, renamesLeft: RenamesLeft?)]

    private let queue = DispatchQueue(label: "transferd.commit", qos: .userInitiated)
    private let waker: CurlMulti.Waker
    private let log: TransferLog
    private let lock = NSLock()
    private var outcome: Outcome?
    /// Loop only: a commit was started and its outcome not yet taken.
    private(set) var isBusy = false

    /// The container's root: files the clients left behind are removed through it.
    private let root: RootDirectory

    init(waker: CurlMulti.Waker, log: TransferLog, root: RootDirectory) {
        self.waker = waker
        self.log = log
        self.root = root
    }

    /// Starts making `commits` durable. Only when not busy.
    func start(_ commits: [SessionCommit]) {
        precondition(!isBusy, "one commit at a time")
        isBusy = true
        queue.async { [self] in
            var done: Outcome = []
            for commit in commits {
                do throws(Errno) {
                    let left = try commit.perform(log: log, root: root)
                    done.append((commit, nil, left))
                } catch {
                    done.append((commit, error, nil))
                }
            }
            lock.lock()
            outcome = done
            lock.unlock()
            waker.wakeup()
        }
    }

    /// The finished commit's outcome, once; nil while it runs or when none was started.
    func takeOutcome() -> Outcome? {
        lock.lock()
        defer { lock.unlock() }
        guard let done = outcome else { return nil }
        outcome = nil
        isBusy = false
        return done
    }

    /// Waits for the commit under way, if any (when the daemon stops).
    func waitUntilDone() {
        queue.sync {}
    }
}
