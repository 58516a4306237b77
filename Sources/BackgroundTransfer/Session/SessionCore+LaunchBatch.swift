import Foundation
import TransferContainer
import TransferLogging

/// A process launched for the session's events and its batches (S3.2, `LaunchBatch`): the
/// one `urlSessionDidFinishEvents` after the batch, the completion handler that acknowledges
/// it, and the events that come later, held for the app's next wake. On the delivery queue.
extension SessionCore {
    /// An event from the daemon: delivered, or held for the next batch once this one was announced.
    func receive(_ event: EventRecord) {
        let held = state.withLock { state in
            state.launch?.holds(event, deliveredThrough: state.deliveredThrough) ?? false
        }
        guard held else { return deliver(event) }
        log.info("delivery", "event \(event.number) came after urlSessionDidFinishEvents: held for the app's next "
                 + "wake, neither delivered nor acknowledged here (S3.2)", session: identifier.rawValue,
                 task: event.task.taskIdentifier)
    }

    /// The daemon has sent every event of a batch: the app launched for them hears
    /// `urlSessionDidFinishEvents` (once a batch), or is woken again for the held ones.
    func backlogDelivered() {
        acknowledgeDue() // before whoever waits for the backlog goes on, and perhaps exits
        defer {
            backlogCondition.lock()
            backlogHandled = true
            backlogCondition.broadcast()
            backlogCondition.unlock()
        }
        let step = state.withLock { state -> LaunchBatch.Step in state.launch?.backlogWord() ?? .nothing }
        take(step)
    }

    /// The app called the completion handler of launch or wake `generation`: every event it
    /// was handed counts as delivered. `staying`: the process goes on (else it exits now, and
    /// the events held wait for the app's next launch).
    func completionHandlerCalled(generation: Int, staying: Bool) {
        deliveryQueue.sync {
            let called = state.withLock { state -> (step: LaunchBatch.Step?, through: UInt64, held: Int) in
                guard state.launch != nil else { return (.nothing, state.receivedThrough, 0) }
                let step = state.launch?.completionHandlerCalled(generation: generation, staying: staying)
                return (step, state.receivedThrough, state.launch?.held.count ?? 0)
            }
            guard let step = called.step else { return } // an earlier launch's handler
            acknowledge(through: called.through)
            if called.held > 0 {
                log.notice("delivery", "\(called.held) events came after urlSessionDidFinishEvents: they wait for the "
                           + "app's next wake or launch", session: identifier.rawValue)
            }
            take(step)
        }
    }

    private func take(_ step: LaunchBatch.Step) {
        switch step {
        case .nothing: break
        case .announce:
            onDelegateQueue { session in self.delegate?.urlSessionDidFinishEvents(forBackgroundURLSession: session) }
        case .wake(let generation): wake(generation)
        }
    }

    /// Wakes the app in this process for the held events (as iOS wakes a suspended app):
    /// its `handleEventsForBackgroundURLSession` with a new completion handler, on the main
    /// queue, then the events, then `urlSessionDidFinishEvents`.
    private func wake(_ generation: Int) {
        BackgroundApplication.wake(for: identifier, generation: generation) { [self] in
            deliveryQueue.async { self.deliverWokenBatch(generation) }
        }
    }

    private func deliverWokenBatch(_ generation: Int) {
        let batch = state.withLock { state in
            state.launch?.woken(generation: generation) ?? (events: [], announce: false)
        }
        for event in batch.events { deliver(event) }
        if batch.announce { take(.announce) }
    }
}
