import Foundation
import BackgroundTransfer
import TransferContainer

/// What a stand-in waiting for its task (`--wait`) says while it waits: why the task does not
/// run now — a retry after an error and when, device conditions, the rate limiter, a begin
/// date — read from the container as the daemon keeps it, one line on stderr each time the
/// reason changes. Used by the waiting thread only.
struct WaitReporter {
    let session: String
    let task: Int
    private var last: String?

    init(session: String, task: Int) {
        self.session = session
        self.task = task
    }

    /// The line to say about the task's reason to wait, if it changed since the last call.
    /// Reads the session's journal and the conditions only, not the whole container: it runs
    /// every second of a wait that may last hours.
    mutating func report(now: Date = Date()) -> String? {
        guard let identifier = try? SessionIdentifier(session) else { return nil }
        let layout = AppEnvironment.layout
        let directory = layout.sessionDirectory(family: AppEnvironment.identity.family, identifier: identifier)
        guard let record = (try? JournalContents.read(session: directory))?.tasks[task] else { return nil }
        let hold = record.hold(under: (try? DeviceConditions.load(from: layout)) ?? DeviceConditions(), now: now)
        let reason: String
        switch hold {
        case .retry(let attempt, let date, let cause)?:
            reason = "\(cause); retrying in \(max(1, Int(date.timeIntervalSince(now).rounded(.up)))) s (retry \(attempt))"
        case let hold?:
            reason = hold.description
        case nil:
            reason = record.state == .running ? "running" : record.state.name
        }
        // A hold names its time (a retry's, not its countdown): each is said once.
        let key = hold?.description ?? reason
        guard key != last else { return nil }
        defer { last = key }
        return last != nil || reason != "running" ? "task \(task): \(reason)" : nil
    }
}
