import Foundation
import TransferContainer
import TransferLogging

/// `allTasks` of a background session (S7.2), asked of the daemon with no thread waiting for
/// the answers: the async API runs on Swift's cooperative pool, as many threads as cores, and
/// a caller blocked there stalls every task of the process; the completion-handler API must
/// not need a thread of that pool either. Safe from any thread.
extension SessionCore {
    /// The session's unfinished tasks, in identifier order, as the daemon has them now, given
    /// to `done` (on a thread of the connection's). The daemon summarises each
    /// (`TaskSummaries`); the records themselves are asked for, in one more request, only of
    /// tasks this process has no object for or a snapshot of another revision of. Tasks
    /// missing from the summary have finished.
    func allTasks(_ done: @escaping @Sendable ([URLSessionTask]) -> Void) {
        // With the data tasks running in this process, which the daemon never hears of (S2.2).
        let done: @Sendable ([URLSessionTask]) -> Void = { [dataTasks] tasks in
            let running = dataTasks.running
            // The daemon's list is in identifier order already: without data tasks to merge,
            // it is handed on as it is (a copy and a sort retained and released every task).
            if running.isEmpty, zip(tasks, tasks.dropFirst()).allSatisfy({ $0.taskIdentifier < $1.taskIdentifier }) { return done(tasks) }
            done((tasks + running).sorted { $0.taskIdentifier < $1.taskIdentifier })
        }
        ask(.getAllTasks(session: identifier)) { [self] reply in
            switch reply {
            case .success(.taskSummaries(let list)):
                let known = knownTasks
                var tasks: [URLSessionTask] = []
                tasks.reserveCapacity(list.tasks.count)
                var unseen: [Int] = []
                for summary in list.tasks {
                    if let task = known[summary.taskIdentifier], task.update(summary) {
                        tasks.append(task)
                    } else {
                        unseen.append(summary.taskIdentifier)
                    }
                }
                guard !unseen.isEmpty else { return done(tasks) }
                ask(.getTasks(session: identifier, identifiers: unseen)) { [self, tasks] reply in
                    switch reply {
                    case .success(.tasks(let records)): done((tasks + records.map(adopt)).sorted { $0.taskIdentifier < $1.taskIdentifier })
                    case .success: done(tasks)
                    case .failure(let error): done(listingFailed(error))
                    }
                }
            case .success(.tasks(let records)): done(records.map(adopt)) // a daemon from before summaries
            case .success: done([])
            case .failure(let error): done(listingFailed(error))
            }
        }
    }

    private func adopt(_ record: TaskRecord) -> URLSessionTask {
        let task = taskObject(for: record)
        task.update(record)
        return task
    }

    private func listingFailed(_ error: TransferFailure) -> [URLSessionTask] {
        log.error("session", "getAllTasks failed: \(error)", session: identifier.rawValue, event: LogEvent(.requestFailed, code: error.code))
        return knownTasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    /// Sends `request` and hands its reply to `answer`, riding through a daemon restart as
    /// `request` does (sent again every 50 ms for up to 15 s while the connection is lost).
    private func ask(_ request: DaemonRequest, until deadline: Date = Date().addingTimeInterval(15), _ answer: @escaping @Sendable (Result<DaemonReply, TransferFailure>) -> Void) {
        let again: @Sendable (TransferFailure) -> Bool = { [self] failure in
            guard Self.isTransient(failure), Date() < deadline, !isInvalidated else { return false }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { [self] in ask(request, until: deadline, answer) }
            return true
        }
        let connection: DaemonConnection
        do { connection = try self.connection() } catch {
            if !again(error) { answer(.failure(error)) }
            return
        }
        connection.request(request) { reply in
            if case .failure(let failure) = reply, again(failure) { return }
            answer(reply)
        }
    }
}
