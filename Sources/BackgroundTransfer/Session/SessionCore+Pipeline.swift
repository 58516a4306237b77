import Foundation
import FoundationNetworking
import TransferContainer
import TransferLogging

/// Requests a background session sends without waiting for their answers (creations,
/// resumes, property changes), kept in order until the daemon answers and sent again after a
/// reattach. Any thread: the pipeline's state is behind its own lock, `pipelineOrder` keeps
/// the sending order.
extension SessionCore {
    /// Sends a request without waiting for its answer, after every request sent this way
    /// before it; the answer updates `task`. Lost with the connection, it is sent again once
    /// the session has reattached (the daemon takes each of these requests twice harmlessly).
    func sendInOrder(_ request: DaemonRequest, for task: URLSessionTask?) {
        pipelineOrder.lock()
        defer { pipelineOrder.unlock() }
        let (number, epoch, stalled) = pipeline.withLock { pipeline in
            let number = pipeline.nextNumber
            pipeline.nextNumber += 1
            pipeline.unanswered.append(.init(number: number, request: request, task: task))
            return (number, pipeline.epoch, pipeline.stalled)
        }
        guard !stalled, let connection = state.withLock({ $0.connection }) else { return }
        transmit(request, number: number, epoch: epoch, on: connection)
    }

    private func transmit(_ request: DaemonRequest, number: UInt64, epoch: Int, on connection: DaemonConnection) {
        connection.send(request) { [weak self] result in self?.answered(number, epoch: epoch, result) }
    }

    /// Runs on the connection's reader thread.
    private func answered(_ number: UInt64, epoch: Int, _ result: Result<DaemonReply, TransferFailure>) {
        if case .failure(let failure) = result, Self.isTransient(failure) {
            pipeline.withLock { if $0.epoch == epoch { $0.stalled = true } }
            return
        }
        let entry = pipeline.withLock { pipeline -> Pipeline.Entry? in
            guard let index = pipeline.unanswered.firstIndex(where: { $0.number == number }) else { return nil } // answered already
            return pipeline.unanswered.remove(at: index)
        }
        // The task takes the answer before `waitForAnswers` returns: a caller that waited
        // sees a refused creation as completed with its error, never as accepted.
        if let entry {
            switch result {
            case .success(.task(let record)):
                entry.task?.takeReply(record)
            case .success:
                break
            case .failure(let failure):
                refused(entry, failure)
            }
        }
        pipelineAnswered.lock()
        pipelineAnswered.broadcast()
        pipelineAnswered.unlock()
    }

    /// The daemon refused a pipelined request: a refused creation completes its task.
    private func refused(_ entry: Pipeline.Entry, _ failure: TransferFailure) {
        // The request's name only: its payload may hold a credential or a token.
        log.error("session", "\(String(describing: entry.request).prefix { $0 != "(" }) failed: \(failure)", session: identifier.rawValue, task: entry.task?.taskIdentifier,
                  event: LogEvent(.requestFailed, code: failure.code))
        guard case .createTask = entry.request, let task = entry.task else { return }
        let error = failure.urlError(failingURL: task.record.originalRequest.url, kind: task.record.kind)
        task.noteRefusedByDaemon()
        task.setState(.completed)
        task.finish(with: error)
        state.withLock { _ = $0.tasks.removeValue(forKey: task.taskIdentifier) }
        deliveryQueue.async {
            guard let delegate = self.delegate as? URLSessionTaskDelegate else { return }
            self.onDelegateQueue { session in delegate.urlSession(session, task: task, didCompleteWithError: error) }
        }
    }

    /// After a reattach: every unanswered request goes again, in order, before any new one.
    func resendUnanswered(on connection: DaemonConnection) {
        pipelineOrder.lock()
        defer { pipelineOrder.unlock() }
        let (entries, epoch) = pipeline.withLock { pipeline in
            pipeline.epoch += 1
            pipeline.stalled = false
            return (pipeline.unanswered, pipeline.epoch)
        }
        for entry in entries { transmit(entry.request, number: entry.number, epoch: epoch, on: connection) }
    }

    /// Waits until the daemon has answered every pipelined request sent before the call
    /// (each answer comes after the change is durable); false on timeout.
    func waitForAnswers(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        let mark = pipeline.withLock { $0.nextNumber }
        pipelineAnswered.lock()
        defer { pipelineAnswered.unlock() }
        while pipeline.withLock({ ($0.unanswered.first?.number ?? mark) < mark }) {
            if !pipelineAnswered.wait(until: deadline) { return false }
        }
        return true
    }

    /// Whether a failed request is asked again: the connection was lost, or a restarted daemon
    /// has not seen the session reopened yet (`TransferFailure.Refusal.sessionNotOpen`).
    static func isTransient(_ failure: TransferFailure) -> Bool {
        failure.code == TransferFailure.networkConnectionLost
            || failure.refusal == .sessionNotOpen
    }

    func perform(_ request: DaemonRequest, on task: URLSessionTask) {
        do {
            let reply = try self.request(request)
            if case .task(let record) = reply { task.takeReply(record) }
        } catch {
            // The request's name only: its payload may hold a credential or a token.
            log.error("session", "\(String(describing: request).prefix { $0 != "(" }) failed: \(error)", session: identifier.rawValue, task: task.taskIdentifier,
                      event: LogEvent(.requestFailed, code: error.code))
        }
    }
}
