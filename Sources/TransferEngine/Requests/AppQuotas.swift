import Foundation
import TransferContainer

/// What one app (bundle identifier) may hold in the daemon: sessions and unfinished tasks,
/// counted over all its sessions, so that one app cannot take the daemon from the others
/// (README "Limits"). Owned by the daemon's loop thread.
final class AppQuotas {
    /// The daemon's sessions as they are now.
    private let sessions: () -> [SessionKey: DaemonSession]
    /// Unfinished tasks one app may have (`transferd --max-tasks-per-app`).
    private let maximumTasksPerApp: Int
    /// Background sessions one app may have, open or not: a session costs the daemon memory
    /// and a folder. Room for the 1,000 sessions of one app the `sessions` benchmark opens.
    static let sessionsPerApp = 1_024
    /// Each app's unfinished tasks as last counted, plus the tasks created since: never fewer
    /// than it has (tasks only end meanwhile), so it is counted again only when it reaches the
    /// cap, not on every creation (a count walks every session).
    private var tasksAtMost: [BundleIdentifier: Int] = [:]

    init(maximumTasksPerApp: Int, sessions: @escaping () -> [SessionKey: DaemonSession]) {
        self.maximumTasksPerApp = maximumTasksPerApp
        self.sessions = sessions
    }

    func checkSessions(of owner: BundleIdentifier, opening identifier: SessionIdentifier) throws(TransferFailure) {
        let count = sessions().values.reduce(0) { $0 + ($1.record.owner == owner ? 1 : 0) }
        guard count >= Self.sessionsPerApp else { return }
        throw TransferFailure(code: TransferFailure.requestRefused,
                              message: "\(owner) already has \(count) background sessions, the most one app may have (\(Self.sessionsPerApp)); session \(identifier) is not created (a session is kept once made: reuse identifiers)",
                              subject: identifier.rawValue)
    }

    /// Counts a new task of `owner`'s in `session`, or refuses it (-1011) past
    /// `Options.maximumTasksPerApp`.
    func admitTask(of owner: BundleIdentifier, in session: DaemonSession) throws(TransferFailure) {
        let cap = maximumTasksPerApp
        var count = tasksAtMost[owner] ?? cap
        if count >= cap {
            count = sessions().values.reduce(0) { $0 + ($1.record.owner == owner ? $1.tasks.count : 0) }
        }
        tasksAtMost[owner] = count
        guard count < cap else {
            throw TransferFailure(code: TransferFailure.requestRefused,
                                  message: "\(owner) already has \(count) unfinished tasks, the most one app may have (\(cap)); no task is created in session \(session.key.identifier)",
                                  subject: session.key.identifier.rawValue)
        }
        tasksAtMost[owner] = count + 1
    }
}
