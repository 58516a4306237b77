import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

// Data tasks of background sessions (S2.2): where they run, and why.
//
// In this process, by FoundationNetworking, through the bridge default sessions' data tasks
// use (ForegroundSession, ForegroundBridge), not in the daemon. Apple's end with -997 when
// their process goes away, so the daemon's durability buys them nothing; streaming every
// body over the daemon's socket would add a copy, a wire protocol and flow control for bytes
// that die with the process anyway, and the delegate calls (`didReceive response`, `didReceive
// data` as it arrives, redirects, challenges) would have to be re-made over that wire, while
// the bridge already makes them as a default session does. What has to outlive the process is
// only the fact that a task was cut: `DataTaskLedger` lists the data tasks made and not seen
// end, and the next process that opens the session hears `didCompleteWithError` with -997 for
// each, once, before the session's other events (Apple's documentation says the task fails
// with -997; when the process is gone, its successor is the one that can hear it). The
// ledger also keeps the highest identifier given to a data task, so that the session's
// numbering, the daemon's, goes on above it and identifiers never collide.

/// The data tasks of one background session, carried out in this process, and the backend
/// their task objects talk to (resume, suspend, cancel go to FoundationNetworking's task;
/// the rest to the session's `SessionCore`). Owned by that `SessionCore`; thread-safe (one
/// lock, under which the ledger is also written, so that it changes in order).
final class BackgroundDataTasks: SessionBackend, @unchecked Sendable {
    private struct State {
        weak var core: SessionCore?
        var ledgerPath: String?
        var ledger = DataTaskLedger()
        var running: [Int: URLSessionTask] = [:]
        var foreground: ForegroundSession?
    }
    private let state = Locked(State())

    /// The identifier the session's numbering must go on from (ledger's highest + 1).
    var nextIdentifier: Int { state.withLock { $0.ledger.highestIdentifier + 1 } }

    /// The data tasks not yet completed, for `getAllTasks`. A task is forgotten only after its
    /// delegate has heard `didCompleteWithError`, and is already completed during that call: it
    /// is left out then, so that `getAllTasks` asked on that news does not list it.
    var running: [URLSessionTask] { state.withLock { $0.running.values.filter { $0.state != .completed } } }

    /// At open, before the daemon is asked: reads the ledger at `ledgerPath` and queues on
    /// `deliveryQueue` (ahead of every event of the daemon's) a -997 `didCompleteWithError`
    /// for each data task the previous holder of the session did not see end. Each is taken
    /// off the ledger before its call: a process killed during the call does not hear it again.
    func attach(to core: SessionCore, ledgerPath: String, deliveryQueue: DispatchQueue) {
        let session = core.identifier.rawValue
        let cut = state.withLock { state -> [DataTaskLedger.Entry] in
            state.core = core
            state.ledgerPath = ledgerPath
            state.ledger = DataTaskLedger.read(at: ledgerPath, log: core.log, session: session)
            return state.ledger.running
        }
        guard !cut.isEmpty else { return }
        deliveryQueue.async { [self] in
            for entry in cut {
                var record = TaskRecord(taskIdentifier: entry.taskIdentifier, kind: .download, originalRequest: RequestRecord(url: entry.url))
                record.taskDescription = entry.taskDescription
                record.state = .completed
                let task = URLSessionDataTask(record: record, backend: nil)
                let error = TransferFailure(code: TransferFailure.backgroundSessionWasDisconnected,
                                            message: "data task \(entry.taskIdentifier) of background session \(session) ended when the process that ran it went away",
                                            subject: entry.url).urlError(failingURL: entry.url)
                task.finish(with: error)
                forget(entry.taskIdentifier)
                core.log.notice("session", "data task \(entry.taskIdentifier) was cut by the end of its process: -997", session: session, task: entry.taskIdentifier)
                guard let delegate = core.delegate as? URLSessionTaskDelegate else { continue }
                core.onDelegateQueue { session in delegate.urlSession(session, task: task, didCompleteWithError: error) }
            }
        }
    }

    /// A data task for `request`, numbered in the session's sequence, suspended; listed in
    /// the ledger before it is returned.
    func create<Task: URLSessionTask>(_ request: URLRequest, creation: TaskCreation, as make: (TaskRecord) -> Task) -> Task? {
        guard let core = state.withLock({ $0.core }) else { return nil }
        let foreground = state.withLock { state -> ForegroundSession in
            if let made = state.foreground { return made }
            let made = ForegroundSession(configuration: core.configuration, delegate: core.delegate, delegateQueue: core.delegateQueue,
                                         session: { [weak core] in core?.primary }, finished: { [weak self] task in self?.ended(task) })
            made.bridge.followsRedirectsSilently = true // as every task of a background session (S2.3)
            state.foreground = made
            return made
        }
        var record = TaskRecord(taskIdentifier: core.reserveTaskIdentifier(), kind: creation.kind, originalRequest: creation.request)
        record.taskDescription = creation.taskDescription
        let task = foreground.makeTask(request, body: .request, record: record, backend: self, as: make, handler: nil)
        let entry = DataTaskLedger.Entry(taskIdentifier: record.taskIdentifier, url: creation.request.url, taskDescription: creation.taskDescription)
        state.withLock { state in
            state.running[record.taskIdentifier] = task
            state.ledger.highestIdentifier = max(state.ledger.highestIdentifier, record.taskIdentifier)
            state.ledger.running.append(entry)
            write(state)
        }
        return task
    }

    /// The bridge delivered the task's end: it is no longer running, nor cut if we die now.
    private func ended(_ task: URLSessionTask) {
        forget(task.taskIdentifier)
    }

    private func forget(_ taskIdentifier: Int) {
        state.withLock { state in
            state.running[taskIdentifier] = nil
            state.ledger.running.removeAll { $0.taskIdentifier == taskIdentifier }
            write(state)
        }
    }

    private func write(_ state: State) {
        guard let path = state.ledgerPath, let core = state.core else { return }
        state.ledger.write(to: path, log: core.log, session: core.identifier.rawValue)
    }

    /// The session is being invalidated: with `cancelTasks`, every data task ends with -999;
    /// otherwise they run to their end (S1.4).
    func invalidate(cancelTasks: Bool) {
        guard cancelTasks else { return }
        for task in running { task.foundationTask?.cancel() }
    }

    // MARK: SessionBackend, for the task objects

    var delegate: URLSessionDelegate? { state.withLock { $0.core }?.delegate }
    var delegateQueue: OperationQueue { state.withLock { $0.core }?.delegateQueue ?? .main }
    var primary: URLSession? { state.withLock { $0.core }?.primary }
    var isInvalidated: Bool { state.withLock { $0.core }?.isInvalidated ?? true }
    func adopt(primary session: URLSession) {}
    func createTask(_ creation: TaskCreation) throws(TransferFailure) -> URLSessionTask {
        throw TransferFailure(code: TransferFailure.unknown, message: "data tasks are made by BackgroundDataTasks.create")
    }
    func reserveTaskIdentifier() -> Int { state.withLock { $0.core }?.reserveTaskIdentifier() ?? 0 }
    func resume(_ task: URLSessionTask) { task.foundationTask?.resume() }
    func suspend(_ task: URLSessionTask) { task.foundationTask?.suspend() }
    func cancel(_ task: URLSessionTask) { task.foundationTask?.cancel() }
    /// A data task has no resume data.
    func cancel(_ task: URLSessionTask, produceResumeData: Bool) -> Data? {
        cancel(task)
        return nil
    }
    /// `taskDescription` and the hints stay on the task object: the ledger keeps the
    /// description given at creation.
    func propertiesChanged(of task: URLSessionTask) {}
    func allTasks(_ done: @escaping @Sendable ([URLSessionTask]) -> Void) {
        guard let core = state.withLock({ $0.core }) else { return done(running) }
        core.allTasks(done)
    }
    func waitForBacklog(timeout: TimeInterval) -> Bool { state.withLock { $0.core }?.waitForBacklog(timeout: timeout) ?? false }
    func drainDeliveries() { state.withLock { $0.core }?.drainDeliveries() }
    func waitForAnswers(timeout: TimeInterval) -> Bool { state.withLock { $0.core }?.waitForAnswers(timeout: timeout) ?? true }
}

extension URLSession {
    /// A data task of this background session (S2.2), suspended, run in this process by the
    /// session's `BackgroundDataTasks`; in a session that is invalid, a task failed at once
    /// with why, as other tasks made there.
    func backgroundDataTask<Task: URLSessionTask>(_ request: URLRequest, creation: TaskCreation, as make: @escaping (TaskRecord) -> Task) -> Task {
        guard let core = core as? SessionCore, !core.isInvalidated else { return makeTask(creation, as: make) }
        guard let task = core.dataTasks.create(request, creation: creation, as: make) else {
            let failure = TransferFailure(code: TransferFailure.unknown, message: "background session \(core.identifier) is not attached to the transfer daemon", subject: core.identifier.rawValue)
            return refusedTask(creation, failure, as: make)
        }
        if let delegate = delegate as? URLSessionTaskDelegate {
            delegateQueue.addOperation { delegate.urlSession(self, didCreateTask: task) }
        }
        return task
    }
}
