internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// Running, finishing and retrying transfers (what may start when: `TransferDaemon+Scheduling`).
extension TransferDaemon {
    /// Removes a task's partial data, error page or upload files (cancel, failure, done).
    func removeTransferFiles(of task: TaskRecord, in session: DaemonSession) {
        let partial = partialPath(for: task, in: session)
        unlink(partial)
        unlink(DownloadTransfer.errorBodyPath(partialPath: partial))
        if task.kind == .upload {
            unlink(uploadBodyPath(for: task, in: session))
            unlink(uploadResponsePath(for: task, in: session))
        }
    }

    /// Hands a configured transfer to libcurl.
    func attach(_ transfer: any Transfer, for key: TaskKey) throws {
        let note = CrashGuard.note(for: key)
        transfer.easy.onCallback = { CrashGuard.working(on: note) }
        try loop.multi.add(transfer.easy)
        transfersByHandle[ObjectIdentifier(transfer.easy)] = transfer
        transfersByTask[key] = transfer
    }

    /// Stops a running transfer without ending its task (suspend, cancel, shutdown); what it
    /// learnt (counts, response, validator, upload location) stays in the task.
    func stopTransfer(_ key: TaskKey) {
        guard let transfer = transfersByTask.removeValue(forKey: key) else { return }
        transfersByHandle.removeValue(forKey: ObjectIdentifier(transfer.easy))
        loop.multi.remove(transfer.easy)
        transfer.close()
        if let session = sessions[key.session], var task = session.tasks[key.task] {
            let known = transfer.task
            task.countOfBytesReceived = known.countOfBytesReceived
            task.countOfBytesExpectedToReceive = known.countOfBytesExpectedToReceive
            task.countOfBytesSent = known.countOfBytesSent
            task.countOfBytesExpectedToSend = known.countOfBytesExpectedToSend
            task.validator = known.validator
            task.response = known.response
            task.uploadResumption = known.uploadResumption
            try? session.update(task)
        }
    }

    /// libcurl finished a transfer, well or not.
    func transferEnded(_ easy: CurlEasy, _ result: Result<Void, CurlError>) {
        guard let transfer = transfersByHandle.removeValue(forKey: ObjectIdentifier(easy)) else { return }
        let key = TaskKey(session: transfer.session, task: transfer.task.taskIdentifier)
        CrashGuard.working(on: CrashGuard.note(for: key))
        defer { CrashGuard.idle() }
        transfersByTask.removeValue(forKey: key) // libcurl has already taken it out of the multi
        schedulingRequested = true // its slot goes to the next task
        guard let session = sessions[transfer.session], session.tasks[key.task] != nil else {
            transfer.close()
            return
        }
        if case .success = result { pushProgress(of: transfer, in: session, now: clock.now, evenIfRecent: true) }
        switch transfer {
        case let download as DownloadTransfer: downloadEnded(download, result, in: session)
        case let upload as UploadTransfer: uploadEnded(upload, result, in: session)
        default: preconditionFailure("unknown transfer \(type(of: transfer))")
        }
        // Not finished (a retry, another step of an upload): it queues again.
        if let task = session.tasks[key.task] { scheduleTransfer(task, in: session) }
    }

    /// A transport failure: tried again or ended, as the retry policy decides (S6.4).
    func retryOrFail(_ task: TaskRecord, in session: DaemonSession, _ error: CurlError) {
        var task = task
        task.retryCount += 1
        task.lastError = error.description
        let code = error.urlErrorCode
        let decision = retryPolicy.afterTransportFailure(code: code, retry: task.retryCount, createdAt: task.createdAt,
                                                         resourceTimeout: session.record.configuration.timeoutIntervalForResource, now: clock.now)
        switch decision {
        case .retry(let notBefore):
            task.retryNotBefore = notBefore
            try? session.update(task)
            log.notice("transfers", "\(error); retry \(task.retryCount) in \(String(format: "%.2f", notBefore.timeIntervalSince(clock.now))) s", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        case .fail(let code):
            var failure = TransferFailure(code: code, message: error.description, subject: task.originalRequest.url)
            if code == TransferFailure.timedOut { failure.resumeData = makeResumeData(for: task, in: session) } // S6.2
            fail(task, in: session, failure)
        }
    }

    /// The server asked to come back in `delay` seconds (`503` + `Retry-After`): tried again
    /// then, or ended now when that is past the task's resource deadline (S6.4).
    func retryLater(_ task: TaskRecord, in session: DaemonSession, after delay: TimeInterval, reason: String) {
        var task = task
        task.retryCount += 1
        task.lastError = reason
        let decision = retryPolicy.afterServiceUnavailable(retryAfter: delay, createdAt: task.createdAt,
                                                           resourceTimeout: session.record.configuration.timeoutIntervalForResource, now: clock.now)
        switch decision {
        case .retry(let start):
            task.retryNotBefore = start
            try? session.update(task)
            loop.schedule(after: start.timeIntervalSince(clock.now)) { [unowned self] in scheduleTransfers() }
            log.notice("transfers", "\(reason); retry \(task.retryCount) in \(String(format: "%.2f", max(0, start.timeIntervalSince(clock.now)))) s", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        case .fail(let code):
            // Asked to come back after the task's whole budget is spent: it ends now as it
            // would then, instead of asking again at the deadline.
            var failure = TransferFailure(code: code, message: "The request timed out (\(reason); the resource timeout ends first)", subject: task.originalRequest.url)
            failure.resumeData = makeResumeData(for: task, in: session) // S6.2
            fail(task, in: session, failure)
        }
    }

    /// Ends a task with an error; its partial data goes.
    func fail(_ task: TaskRecord, in session: DaemonSession, _ failure: TransferFailure) {
        removeTransferFiles(of: task, in: session)
        end(task, in: session, error: failure, note: "failed: \(failure.message)")
    }

    /// Ends a task for good: its completion event is made durable, then delivered to the
    /// holder; `note` is logged. Returns false when the event could not be recorded (the
    /// task then stays, to be ended at the next start).
    @discardableResult
    func end(_ task: TaskRecord, in session: DaemonSession, downloadedFile: String? = nil, error: TransferFailure? = nil, responseBody: Data? = nil, note: String) -> Bool {
        do {
            _ = try session.complete(task, downloadedFile: downloadedFile, error: error, responseBody: responseBody)
            forgetTask(TaskKey(session: session.key, task: task.taskIdentifier))
        } catch let storeError {
            log.error("store", "cannot record the end of the task (\(note)): \(storeError)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return false
        }
        if error == nil {
            log.notice("transfers", note, session: session.key.identifier.rawValue, task: task.taskIdentifier)
        } else {
            log.error("transfers", note, session: session.key.identifier.rawValue, task: task.taskIdentifier)
        }
        pushPendingEvents(session)
        finishInvalidationIfDone(session)
        return true
    }

    /// Tasks whose whole budget is spent end with -1001 (S5 `timeoutIntervalForResource`).
    func enforceResourceTimeouts(now: Date) {
        guard now >= nextResourceDeadline else { return }
        var next = Date.distantFuture
        for session in sessions.values {
            let budget = session.record.configuration.timeoutIntervalForResource
            for task in session.tasks.values {
                let deadline = task.createdAt.addingTimeInterval(budget)
                guard now > deadline else {
                    next = min(next, deadline)
                    continue
                }
                guard task.state == .running else { continue } // looked at again when resumed
                stopTransfer(TaskKey(session: session.key, task: task.taskIdentifier))
                let current = session.tasks[task.taskIdentifier] ?? task
                var failure = TransferFailure(code: TransferFailure.timedOut, message: "The request timed out (resource timeout of \(String(format: "%.0f", budget)) s)", subject: task.originalRequest.url)
                failure.resumeData = makeResumeData(for: current, in: session) // S6.2
                fail(current, in: session, failure)
            }
        }
        nextResourceDeadline = next
    }

    /// Pushes progress of running transfers to attached clients, at most every 100 ms per task (S7.3).
    func reportProgress(now: Date) {
        for transfer in transfersByHandle.values {
            guard let session = sessions[transfer.session] else { continue }
            pushProgress(of: transfer, in: session, now: now)
        }
    }

    /// Pushes one transfer's progress if it moved; `evenIfRecent` for its last report, so that
    /// the delegate sees the final count before the completion.
    private func pushProgress(of transfer: any Transfer, in session: DaemonSession, now: Date, evenIfRecent: Bool = false) {
        let total = transfer.bytesMoved
        guard session.holder != nil, total != transfer.lastReportedBytes,
              evenIfRecent || now.timeIntervalSince(transfer.lastProgressReport) >= 0.1 else { return }
        let progress = transfer.progress
        transfer.lastReportedBytes = total
        transfer.lastProgressReport = now
        push(.progress(session: session.key.identifier, progress), to: session)
        if let download = transfer as? DownloadTransfer { pushFollowerProgress(of: download, in: session) }
    }
}
