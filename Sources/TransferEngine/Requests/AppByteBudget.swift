import Foundation
import TransferContainer

/// The bytes one app (bundle identifier) may make the daemon hold: its unfinished task
/// records and its undelivered events, all its sessions together, as `HeldBytes` counts them
/// (README "Limits"). A task that would take the app past it is refused with -1011; what frees
/// room is tasks ending and events acknowledged. Owned by the daemon's loop thread.
final class AppByteBudget {
    /// The daemon's sessions as they are now.
    private let sessions: () -> [SessionKey: DaemonSession]
    /// Bytes one app may hold (`transferd --max-bytes-per-app`).
    let budget: Int
    /// Each app's bytes as last counted plus the tasks admitted since. Records grow after
    /// creation (responses, errors), so the count is made again at the budget and after
    /// `admissionsPerCount` admissions, not at each one (a count walks every record of the app).
    private var counted: [BundleIdentifier: (bytes: Int, admissions: Int)] = [:]
    private static let admissionsPerCount = 1_024

    init(budget: Int, sessions: @escaping () -> [SessionKey: DaemonSession]) {
        self.budget = budget
        self.sessions = sessions
    }

    /// Counts `bytes` more for `owner`'s new task in `session`, or refuses it (-1011) when
    /// the app would then hold more than `budget`.
    func admit(_ bytes: Int, of owner: BundleIdentifier, in session: DaemonSession) throws(TransferFailure) {
        var held = counted[owner] ?? (budget, Self.admissionsPerCount)
        if held.bytes > budget - bytes || held.admissions >= Self.admissionsPerCount {
            held = (bytesHeld(by: owner), 0)
        }
        guard held.bytes <= budget - bytes else {
            counted[owner] = held
            let message = "\(owner) holds \(held.bytes) bytes of task records and undelivered events; a task of "
                + "\(bytes) bytes more is past the budget of \(budget) bytes one app may have; no task is created in "
                + "session \(session.key.identifier) (tasks that end and events acknowledged make room)"
            throw TransferFailure(code: TransferFailure.requestRefused, message: message,
                                  subject: session.key.identifier.rawValue)
        }
        counted[owner] = (held.bytes + bytes, held.admissions + 1)
    }

    /// What `owner`'s records and events count now.
    private func bytesHeld(by owner: BundleIdentifier) -> Int {
        var bytes = 0
        for session in sessions().values where session.record.owner == owner {
            for task in session.tasks.values { bytes += HeldBytes.of(task) }
            for event in session.events.values { bytes += HeldBytes.of(event) }
        }
        return bytes
    }
}
