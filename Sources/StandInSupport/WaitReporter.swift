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
    mutating func report(now: Date = Date()) -> String? {
        let snapshot = ContainerSnapshot.read(AppEnvironment.layout, sessionFilter: session)
        guard let record = snapshot.sessions.first?.tasks.first(where: { $0.taskIdentifier == task }) else { return nil }
        let reason: String
        switch record.hold(under: snapshot.conditions, now: now) {
        case .retry(let date, let error)?:
            reason = "\(error); retrying in \(max(1, Int(date.timeIntervalSince(now).rounded(.up)))) s (retry \(record.retryCount))"
        case let hold?:
            reason = hold.description
        case nil:
            reason = record.state == .running ? "running" : record.state.name
        }
        // A retry's countdown changes every second; its line is said once per retry.
        let key = record.retryNotBefore.map { "\(reason.prefix(while: { $0 != ";" }))@\($0.timeIntervalSince1970)" } ?? reason
        guard key != last else { return nil }
        defer { last = key }
        return last != nil || reason != "running" ? "task \(task): \(reason)" : nil
    }
}
