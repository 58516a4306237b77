import Foundation
import TransferContainer

/// `getAllTasks` and its kin: a session's tasks as the app sees them, with the counts of
/// running transfers. Owned by the daemon's loop thread.
final class TaskListing {
    /// The transfers in flight, whose counts are newer than the records'.
    private unowned let transfers: RunningTransfers

    init(transfers: RunningTransfers) {
        self.transfers = transfers
    }

    func taskSummaries(of session: DaemonSession) -> TaskSummaries {
        let running = runningTasks(of: session)
        // Summaries sorted, not records (a copy of each of 10,000 records costs milliseconds).
        var summaries: [TaskSummary] = []
        summaries.reserveCapacity(session.tasks.count)
        let tasks = session.tasks
        tasks.forEachRecord { task in
            summaries.append(running[task.taskIdentifier] == nil ? TaskSummary(of: task) : TaskSummary(of: withCurrentCounts(task, running: running)))
        }
        if !Self.placeInOrder(&summaries) { summaries.sort { $0.taskIdentifier < $1.taskIdentifier } }
        return TaskSummaries(summaries)
    }

    /// Puts `summaries` in identifier order by placing each at its identifier's offset from
    /// the smallest, when the identifiers lie close together (a session numbers its tasks
    /// from 1, so they nearly always do): one pass instead of a sort's comparisons and moves
    /// (a tenth of a `getAllTasks` of 100,000 tasks in the daemon). False, changing nothing,
    /// when they are spread too far for that.
    static func placeInOrder(_ summaries: inout [TaskSummary]) -> Bool {
        guard let low = summaries.lazy.map(\.taskIdentifier).min(), let high = summaries.lazy.map(\.taskIdentifier).max(),
              high - low < 4 * summaries.count + 1024 else { return false }
        var slots = [TaskSummary?](repeating: nil, count: high - low + 1)
        for summary in summaries { slots[summary.taskIdentifier - low] = summary }
        summaries = slots.compactMap { $0 }
        return true
    }

    /// The records of those of `identifiers` that are unfinished tasks of `session`, in identifier order.
    func taskRecords(_ identifiers: [Int], of session: DaemonSession) -> [TaskRecord] {
        let running = runningTasks(of: session)
        return Set(identifiers).sorted().compactMap { session.tasks[$0].map { withCurrentCounts($0, running: running) } }
    }

    /// The tasks of `session` that have a transfer under way, as their transfers know them.
    private func runningTasks(of session: DaemonSession) -> [Int: TaskRecord] {
        var running: [Int: TaskRecord] = [:]
        for (key, transfer) in transfers.transfersByTask where key.session == session.key {
            running[key.task] = transfer.task
        }
        return running
    }

    private func withCurrentCounts(_ task: TaskRecord, running: [Int: TaskRecord]) -> TaskRecord {
        guard let known = running[task.taskIdentifier] else { return task }
        var task = task
        task.countOfBytesReceived = known.countOfBytesReceived
        task.countOfBytesExpectedToReceive = known.countOfBytesExpectedToReceive
        task.countOfBytesSent = known.countOfBytesSent
        task.countOfBytesExpectedToSend = known.countOfBytesExpectedToSend
        return task
    }
}
