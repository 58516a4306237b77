import Foundation
import FoundationNetworking
import TransferContainer
import TransferLogging

/// The daemon's pushes to a background session and their in-order, exactly-once delivery to
/// the delegate (S3.4, S3.5): pushes arrive on the connection's reader thread and are handled
/// on `deliveryQueue` (serial), each delegate call on the delegate queue.
extension SessionCore {
    func received(_ push: DaemonPush) {
        switch push {
        case .event(_, let event):
            deliveryQueue.async { self.receive(event) }
        case .progress(_, let progress):
            guard let task = state.withLock({ $0.tasks[progress.taskIdentifier] }) else { return }
            task.update(progress)
            deliveryQueue.async {
                if task is URLSessionUploadTask, let delegate = self.delegate as? URLSessionTaskDelegate {
                    self.onDelegateQueue { session in
                        delegate.urlSession(session, task: task, didSendBodyData: progress.bytesSent, totalBytesSent: progress.totalBytesSent, totalBytesExpectedToSend: progress.totalBytesExpectedToSend)
                    }
                } else if let download = task as? URLSessionDownloadTask, let delegate = self.delegate as? URLSessionDownloadDelegate {
                    self.onDelegateQueue { session in
                        delegate.urlSession(session, downloadTask: download, didWriteData: progress.bytesWritten, totalBytesWritten: progress.totalBytesWritten, totalBytesExpectedToWrite: progress.totalBytesExpectedToWrite)
                    }
                }
            }
        case .didResume(_, let taskID, let offset, let expected):
            guard let download = state.withLock({ $0.tasks[taskID] }) as? URLSessionDownloadTask else { return }
            deliveryQueue.async {
                guard let delegate = self.delegate as? URLSessionDownloadDelegate else { return }
                self.onDelegateQueue { session in
                    delegate.urlSession(session, downloadTask: download, didResumeAtOffset: offset, expectedTotalBytes: expected)
                }
            }
        case .waitingForConnectivity(_, let taskID):
            guard let task = state.withLock({ $0.tasks[taskID] }) else { return }
            deliveryQueue.async {
                guard let delegate = self.delegate as? URLSessionTaskDelegate else { return }
                self.onDelegateQueue { session in delegate.urlSession(session, taskIsWaitingForConnectivity: task) }
            }
        case .delayedRequest(_, let record):
            let task = taskObject(for: record)
            task.update(record)
            deliveryQueue.async { self.askDelayedRequest(task) }
        case .challenge(_, let record):
            let task = taskObject(for: record)
            task.update(record)
            deliveryQueue.async { self.askAboutChallenge(record.pendingChallenge, of: task) }
        case .retryHeaders(_, let record):
            let task = taskObject(for: record)
            task.update(record)
            deliveryQueue.async { self.askForRetryHeaders(task) }
        case .backlogDelivered:
            deliveryQueue.async { self.backlogDelivered() }
        case .invalidated(_, let failure):
            deliveryQueue.async { self.finishInvalidation(failure) }
        case .transfers:
            break // only for watchers; never routed to a session
        }
    }

    /// Hands one event to the delegate, unless it already saw it (S3.4), then records and acknowledges it.
    func deliver(_ event: EventRecord) {
        let alreadySeen = state.withLock { state -> Bool in
            state.receivedThrough = max(state.receivedThrough, event.number)
            return event.number <= state.deliveredThrough
        }
        if alreadySeen {
            log.info("delivery", "event \(event.number) already delivered; not shown again", session: identifier.rawValue, task: event.task.taskIdentifier)
        } else {
            let task = taskObject(for: event.task)
            let error = event.error.map { $0.urlError(failingURL: event.task.originalRequest.url, kind: event.task.kind) }
            task.finish(with: error) // first: a task is never seen completed without its error
            task.update(event.task, keepingRequests: event.requestHeadersLeftOut == true)
            let interruptedPhase = state.withLock { state -> DeliveryPhase? in
                state.tasks.removeValue(forKey: event.task.taskIdentifier)
                return state.interrupted?.number == event.number ? state.interrupted?.phase : nil
            }
            if interruptedPhase != nil {
                log.notice("delivery", "event \(event.number) was interrupted in \(interruptedPhase!.rawValue) by the death of its last holder; not repeating what may have run", session: identifier.rawValue, task: task.taskIdentifier)
            }

            // The event names the file relative to the container (absolute in older records):
            // the delegate gets it in this process's container, never a file outside it.
            let downloadedPath = event.downloadedFile.flatMap(layout.resolveRecordPath)
            if let stored = event.downloadedFile, downloadedPath == nil {
                log.error("delivery", "downloaded file \(stored) lies outside the container \(layout.root.path); refused, didFinishDownloadingTo skipped", session: identifier.rawValue, task: task.taskIdentifier)
            }
            if let path = downloadedPath, event.error == nil, let download = task as? URLSessionDownloadTask {
                let exists = FileManager.default.fileExists(atPath: path)
                // A previous holder that died in didFinishDownloadingTo and took the file: done.
                if exists && interruptedPhase != .completing {
                    if let delegate = delegate as? URLSessionDownloadDelegate {
                        onDelegateQueue(marking: (event.number, .finishingDownload)) { session in
                            delegate.urlSession(session, downloadTask: download, didFinishDownloadingTo: URL(fileURLWithPath: path))
                        }
                    }
                    // The file exists only during the call (S3.3). One `unlink`, which mostly
                    // finds it moved away; FileManager for what else a delegate left there (a folder).
                    if unlink(path) != 0 && errno != ENOENT { try? FileManager.default.removeItem(atPath: path) }
                } else if !exists && interruptedPhase == nil {
                    log.error("delivery", "downloaded file \(path) is gone; didFinishDownloadingTo skipped", session: identifier.rawValue, task: task.taskIdentifier)
                }
            }
            // An upload's answer: given again if a holder died during the call (at least once).
            if let data = event.responseBody, !data.isEmpty, interruptedPhase != .completing,
               let upload = task as? URLSessionUploadTask, let delegate = delegate as? URLSessionDataDelegate {
                onDelegateQueue(marking: (event.number, .receivingData)) { session in
                    delegate.urlSession(session, dataTask: upload, didReceive: data)
                }
            }
            if interruptedPhase != .completing, let delegate = delegate as? URLSessionTaskDelegate {
                let metrics = URLSessionTaskMetrics(task: event.task, endedAt: event.createdAt, request: { task.currentRequest }, response: { task.response })
                onDelegateQueue(marking: (event.number, .completing)) { session in
                    delegate.urlSession(session, task: task, didFinishCollecting: metrics)
                    delegate.urlSession(session, task: task, didCompleteWithError: error)
                }
            }
            if delegate == nil { tellOfMissingDelegate(event) }
            state.withLock { $0.deliveredThrough = event.number }
            do {
                try deliveryRecord.write(DeliveryRecord(deliveredThrough: event.number))
            } catch {
                log.error("delivery", "cannot record delivery of event \(event.number): \(error)", session: identifier.rawValue)
            }
        }
        if !state.withLock({ $0.acknowledgesOnCompletionHandler }) { acknowledgeSoon(through: event.number) }
    }

    /// A session without a delegate takes its events and acknowledges them, so that the daemon
    /// does not launch the app for them again and again, but nothing sees them: said once per
    /// session on stderr (and logged), as the events are gone for good (S1.2).
    private func tellOfMissingDelegate(_ event: EventRecord) {
        let first = state.withLock { state in
            defer { state.toldOfMissingDelegate = true }
            return !state.toldOfMissingDelegate
        }
        guard first else { return }
        let message = "background session \(identifier) has no delegate: its events are acknowledged "
            + "without being delivered, starting with event \(event.number) "
            + "(task \(event.task.taskIdentifier) completed); "
            + "give URLSession(configuration:delegate:delegateQueue:) a delegate to receive them"
        log.error("delivery", message, session: identifier.rawValue, task: event.task.taskIdentifier,
                  event: LogEvent(.eventsWithoutDelegate))
        FileHandle.standardError.write(Data("\(log.process): \(message)\n".utf8))
    }

    /// Acknowledges through `number` once the deliveries already queued are done: a burst of
    /// events costs one sync of `delivered.json` and one request, not one of each per event.
    private func acknowledgeSoon(through number: UInt64) {
        let schedule = state.withLock { state -> Bool in
            defer { state.acknowledgementDue = max(state.acknowledgementDue ?? 0, number) }
            return state.acknowledgementDue == nil
        }
        if schedule { deliveryQueue.async { self.acknowledgeDue() } }
    }

    /// Sends the acknowledgement `acknowledgeSoon` left waiting, if any. Any thread: what it
    /// acknowledges is recorded in `delivered.json` already.
    func acknowledgeDue() {
        if let due = state.withLock({ state in defer { state.acknowledgementDue = nil }; return state.acknowledgementDue }) { acknowledge(through: due) }
    }

    /// Records, before a delegate call, which event and call are under way (atomic; it must
    /// survive this process's death, not a power cut).
    private func markDelivery(of number: UInt64, phase: DeliveryPhase) {
        let delivered = state.withLock { $0.deliveredThrough }
        do {
            try deliveryRecord.write(DeliveryRecord(deliveredThrough: delivered, inProgress: number, phase: phase))
        } catch {
            log.error("delivery", "cannot record delivery of event \(number): \(error)", session: identifier.rawValue)
        }
    }

    /// Tells the daemon, without waiting, that the events through `number` were handled.
    func acknowledge(through number: UInt64) {
        let isNew = state.withLock { state -> Bool in
            guard number > state.acknowledgedThrough else { return false }
            state.acknowledgedThrough = number
            return true
        }
        guard isNew else { return }
        // On disk first: a power cut may take the daemon's record of this acknowledgement, and then only ours hides the events.
        do { try deliveryRecord.sync() } catch { log.error("delivery", "cannot make the delivery of events through \(number) durable: \(error)", session: identifier.rawValue) }
        sendInOrder(.acknowledge(session: identifier, through: number), for: nil)
    }

    /// Runs a delegate call on the delegate queue and waits for it, keeping events in order.
    /// With `marking`, records the event and call as under way right before the call starts
    /// (on the delegate queue, so that no queueing delay lies between the mark and the call).
    func onDelegateQueue(marking mark: (number: UInt64, phase: DeliveryPhase)? = nil, _ call: @escaping @Sendable (URLSession) -> Void) {
        guard let session = primary else { return }
        let operation = BlockOperation { [self] in
            if let mark { markDelivery(of: mark.number, phase: mark.phase) }
            Thread.current.threadDictionary[Self.delegateCallKey] = true
            defer { Thread.current.threadDictionary.removeObject(forKey: Self.delegateCallKey) }
            call(session)
        }
        delegateQueue.addOperations([operation], waitUntilFinished: true)
    }

    private static let delegateCallKey = "BackgroundTransfer.inDelegateCall"

    /// Whether this thread is inside a delegate call, which a session's delivery waits on: what
    /// the app does from there (call its completion handler) must not wait for that delivery.
    static var isInDelegateCall: Bool { Thread.current.threadDictionary[delegateCallKey] != nil }

    /// Waits until the events that were waiting when the session was opened have been handed
    /// to the delegate; false on timeout.
    func waitForBacklog(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        backlogCondition.lock()
        defer { backlogCondition.unlock() }
        while !backlogHandled {
            if !backlogCondition.wait(until: deadline) { return backlogHandled }
        }
        return true
    }

    /// Waits until every push received so far has been handed to the delegate and the
    /// daemon has taken the acknowledgements.
    func drainDeliveries() {
        deliveryQueue.sync { acknowledgeDue() }
        _ = waitForAnswers(timeout: DaemonConnection.requestTimeout)
    }
}
