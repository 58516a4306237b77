import Foundation
import FoundationNetworking
import TransferContainer

/// How a session makes each task it is asked for: in its backend, refused and completed with
/// the reason, or with a completion handler in place of the delegate's data calls. Any thread.
extension URLSession {
    /// A task whose outcome goes to `handler` rather than to the delegate's data calls.
    func handlerTask<Task: URLSessionTask>(_ creation: TaskCreation, refusal: TransferFailure? = nil, as orphan: @escaping (TaskRecord) -> Task, handler: @escaping @Sendable (URLSessionTask, Result<String, Error>) -> Void) -> Task {
        guard configuration.identifier == nil, refusal == nil else {
            let failure = refusal ?? TransferFailure(code: TransferFailure.unknown, message: BackgroundSessionMisuse.completionHandlersUnsupported.message, subject: configuration.identifier)
            let task = refusedTask(creation, failure, as: orphan)
            let error = task.error ?? failure.urlError()
            delegateQueue.addOperation { handler(task, .failure(error)) }
            return task
        }
        guard let local = core as? LocalSessionCore, !local.isInvalidated else {
            let task = makeTask(creation, as: orphan) // fails: the session is invalid
            let error = task.error ?? TransferFailure(code: TransferFailure.cancelled, message: BackgroundSessionMisuse.sessionInvalidated.message).urlError()
            delegateQueue.addOperation { handler(task, .failure(error)) }
            return task
        }
        let made = local.createHandlerTask(creation, make: orphan) { task, result in
            handler(task, result.mapError { $0.urlError(failingURL: creation.request.url) })
        }
        if let delegate = delegate as? URLSessionTaskDelegate {
            delegateQueue.addOperation { delegate.urlSession(self, didCreateTask: made) }
        }
        return made
    }

    /// Creates the task in the backend, with what this session's configuration and the
    /// request (`cellular`) ask of the network and power (S5). Never traps: a task the
    /// backend refuses, or one asked of a session that is invalid (it never opened, or the
    /// app invalidated it), comes back completed with the error, which its delegate also
    /// gets through `didCompleteWithError`; the daemon never had it.
    func makeTask<Task: URLSessionTask>(_ creation: TaskCreation, cellular: Bool = true, as orphan: (TaskRecord) -> Task) -> Task {
        var creation = creation
        creation.requirements = TaskRequirements(
            allowsCellularAccess: configuration.allowsCellularAccess && cellular,
            allowsExpensiveNetworkAccess: configuration.allowsExpensiveNetworkAccess,
            allowsConstrainedNetworkAccess: configuration.allowsConstrainedNetworkAccess,
            isDiscretionary: configuration.isDiscretionary)
        let failure: TransferFailure
        if let core, !core.isInvalidated {
            do {
                let made = try core.createTask(creation)
                if let task = made as? Task {
                    if let delegate = delegate as? URLSessionTaskDelegate {
                        delegateQueue.addOperation { delegate.urlSession(self, didCreateTask: task) }
                    }
                    return task
                }
                failure = TransferFailure(code: TransferFailure.unknown, message: "the session made a \(type(of: made)) where a \(Task.self) was asked for")
            } catch {
                failure = error
            }
        } else {
            failure = invalidationFailure ?? TransferFailure(code: TransferFailure.cancelled, message: BackgroundSessionMisuse.sessionInvalidated.message, subject: configuration.identifier)
        }
        return refusedTask(creation, failure, as: orphan)
    }

    /// A task that was never created: completed at once with `failure`, reported to the delegate.
    func refusedTask<Task: URLSessionTask>(_ creation: TaskCreation, _ failure: TransferFailure, as orphan: (TaskRecord) -> Task) -> Task {
        let number = core?.reserveTaskIdentifier() ?? refusedTaskNumbers.withLock { value -> Int in
            value += 1
            return value
        }
        var record = TaskRecord(taskIdentifier: number, creation: creation)
        record.state = .completed
        let task = orphan(record)
        let error = failure.urlError(failingURL: creation.request.url.isEmpty ? nil : creation.request.url, kind: creation.kind)
        task.finish(with: error)
        if AppEnvironment.isBootstrapped {
            AppEnvironment.log.error("session", "task \(number) refused: \(failure.message)", session: configuration.identifier, task: number)
        }
        if let delegate = delegate as? URLSessionTaskDelegate {
            delegateQueue.addOperation { delegate.urlSession(self, task: task, didCompleteWithError: error) }
        }
        return task
    }
}
