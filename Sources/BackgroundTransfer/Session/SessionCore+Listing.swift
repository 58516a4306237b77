import Foundation
import TransferContainer

/// `allTasks` of a background session (S7.2), asked of the daemon without blocking a thread:
/// the async API runs on Swift's cooperative pool, as many threads as cores, and one caller
/// waiting on a semaphore there stalls every task of the process. Safe from any thread.
extension SessionCore {
    /// Like `request`, suspending instead of blocking a thread (see `DaemonConnection.reply(to:)`),
    /// and riding through a daemon restart the same way.
    private func requestSuspending(_ request: DaemonRequest) async throws(TransferFailure) -> DaemonReply {
        let deadline = Date().addingTimeInterval(15)
        while true {
            do {
                return try await connection().reply(to: request)
            } catch {
                guard Self.isTransient(error), Date() < deadline, !isInvalidated else { throw error }
                try? await Task.sleep(nanoseconds: 50_000_000) // the connection reconnects and the session reattaches by themselves
            }
        }
    }

    /// The session's unfinished tasks, in identifier order, as the daemon has them now. The
    /// daemon summarises each (`TaskSummaries`); the records themselves are asked for, in one
    /// more request, only of tasks this process has no object for or a snapshot of another
    /// revision of. Tasks missing from the summary have finished. Suspends while the daemon
    /// answers: no thread waits.
    func allTasks() async -> [URLSessionTask] {
        let adopt = { (record: TaskRecord) -> URLSessionTask in
            let task = self.taskObject(for: record)
            task.update(record)
            return task
        }
        do {
            let summaries: [TaskSummary]
            switch try await requestSuspending(.getAllTasks(session: identifier)) {
            case .taskSummaries(let list): summaries = list.tasks
            case .tasks(let records): return records.map(adopt) // a daemon from before summaries
            default: return []
            }
            let known = knownTasks
            var tasks: [URLSessionTask] = []
            var unseen: [Int] = []
            for summary in summaries {
                if let task = known[summary.taskIdentifier], task.update(summary) {
                    tasks.append(task)
                } else {
                    unseen.append(summary.taskIdentifier)
                }
            }
            guard !unseen.isEmpty else { return tasks }
            if case .tasks(let records) = try await requestSuspending(.getTasks(session: identifier, identifiers: unseen)) {
                tasks += records.map(adopt)
            }
            return tasks.sorted { $0.taskIdentifier < $1.taskIdentifier }
        } catch {
            log.error("session", "getAllTasks failed: \(error)", session: identifier.rawValue)
            return knownTasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier }
        }
    }
}
