import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX
import TransferLogging

/// What the group commit sees of the rest of the daemon: the sessions whose changes it
/// commits, and the connections whose output waits for them. `TransferDaemon` answers, on the loop thread.
protocol CommitSurroundings: AnyObject {
    /// The sessions, each turn: their changes go to disk together.
    var sessions: [SessionKey: DaemonSession] { get }
    /// The connected clients: their replies and pushes are let out once what they tell is durable.
    var clientConnections: Dictionary<Int32, ClientConnection>.Values { get }
}

/// Group commit: each turn's changes of every session go to disk together on the commit
/// thread, and replies and pushes wait until what they tell is durable. Owned by the daemon's
/// loop thread.
final class GroupCommit {
    private unowned let surroundings: any CommitSurroundings
    private let loop: EventLoop
    private let log: TransferLog
    private let clock: any TimeSource
    /// Makes the sessions' changes durable on a thread of its own.
    private let commitThread: CommitThread
    /// While the last commit failed: why, and the sessions whose changes wait for the disk.
    /// Output that tells of those changes waits; requests that would change something are
    /// refused (`JournalReserve.cannotRecord(_:writing:)`); everything else goes on.
    private(set) var failure: Errno?
    private var failingSessions: Set<SessionKey> = []
    private var commitFailing: Bool { failure != nil }
    /// After a failed commit, the next is not tried before this (a full disk fails at once).
    private var nextCommitTry = Date.distantPast

    init(surroundings: any CommitSurroundings, loop: EventLoop, log: TransferLog, root: RootDirectory, clock: any TimeSource) {
        self.surroundings = surroundings
        self.loop = loop
        self.log = log
        self.clock = clock
        self.commitThread = CommitThread(waker: loop.multi.waker, log: log, root: root)
    }

    /// Starts making this turn's changes durable in every session, unless a commit is under
    /// way (they then wait for the next one), and lets out the replies and pushes whose
    /// changes are on disk. While commits fail (a full or failing disk) the output of the
    /// failing sessions' holders waits, so that no client hears of a change that is not on
    /// disk, except what tells of no change (`ClientConnection.send(_:overtaking:)`); the
    /// commits are tried again every 100 ms.
    func commitAndFlush() {
        if let outcome = commitThread.takeOutcome() { commitEnded(outcome) }
        if !commitThread.isBusy && clock.now >= nextCommitTry {
            var commits: [SessionCommit] = []
            var unencodable = false
            for session in surroundings.sessions.values where session.needsCommit {
                do {
                    if let commit = try session.takeCommit() { commits.append(commit) }
                } catch {
                    unencodable = true // its changes are not on disk: nothing may be told of them
                    log.error("store", "cannot encode the session's changes: \(error)", session: session.key.identifier.rawValue)
                }
            }
            if commits.isEmpty {
                if !commitFailing && !unencodable { surroundings.clientConnections.forEach { $0.releaseAll() } }
            } else {
                commitThread.start(commits)
                surroundings.clientConnections.forEach { $0.coverByCommit() }
            }
        } else if commitThread.isBusy && !surroundings.sessions.values.contains(where: \.needsCommit) {
            surroundings.clientConnections.forEach { $0.coverByCommit() } // told only of what is being committed
        }
        for connection in surroundings.clientConnections where connection.hasReleasedOutput { connection.flush() }
    }

    private func commitEnded(_ outcome: CommitThread.Outcome) {
        var failed: Errno?
        var failedSessions: Set<SessionKey> = []
        for (commit, error, renamesLeft) in outcome {
            guard let session = surroundings.sessions[commit.session] else { continue }
            if let error = error ?? renamesLeft?.error {
                failed = failed ?? error
                failedSessions.insert(commit.session)
                if let renamesLeft {
                    // The lines are on disk; only the finished files' names are not.
                    session.committed(commit)
                    session.renameAgain(renamesLeft.renames)
                } else {
                    session.commitFailed(commit)
                }
                if !failingSessions.contains(commit.session) {
                    log.error("store", "cannot commit the session's changes: \(error); what tells of them waits until it succeeds, and requests that change something are refused", session: commit.session.identifier.rawValue)
                }
            } else {
                session.committed(commit)
            }
        }
        if failed != nil {
            nextCommitTry = clock.now.addingTimeInterval(0.1)
            loop.schedule(after: 0.1) {}
            // A connection of another app family (or none yet: a new connection's ping) can
            // have been told nothing of the failing sessions' changes: its output goes. (Not
            // the sessions it holds now: it may have closed one it was just told of.)
            let failingFamilies = Set(failedSessions.map(\.family))
            for connection in surroundings.clientConnections where !(connection.hello.map { failingFamilies.contains($0.identity.family) } ?? false) {
                connection.releaseCovered()
            }
        } else {
            if commitFailing { log.notice("store", "changes committed again; replies resume") }
            surroundings.clientConnections.forEach { $0.releaseCovered() }
        }
        failure = failed
        failingSessions = failedSessions
    }

    /// Waits for the commit under way and commits what is left: before the daemon exits, and
    /// before it tries anything again after a crash.
    func commitAndWait() {
        for _ in 0..<2 {
            commitThread.waitUntilDone()
            nextCommitTry = .distantPast
            commitAndFlush()
        }
        commitThread.waitUntilDone()
        if let outcome = commitThread.takeOutcome() { commitEnded(outcome) }
    }
}
