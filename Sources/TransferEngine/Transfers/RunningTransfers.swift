internal import Glibc
import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX

/// What the running transfers see of the rest of the daemon (on the loop thread): the
/// sessions, where an ended exchange goes next, and where progress is pushed. `TransferDaemon`
/// answers (`TransferDaemon+RunningTransfersSurroundings.swift`).
protocol RunningTransfersSurroundings: AnyObject {
    var sessions: [SessionKey: DaemonSession] { get }
    /// An exchange of `task` ended: its slot may go to the next task, and what it learnt of
    /// the server's HTTP version is kept for the next (the scheduler's).
    func transferSlotFreed(by task: TaskRecord)
    /// A download's exchange ended: the download goes on, retries or ends (`Downloads`).
    func downloadEnded(_ transfer: DownloadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession)
    /// An upload's exchange ended: the upload takes its next step, retries or ends (`Uploads`).
    func uploadEnded(_ transfer: UploadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession)
    /// A task whose exchange ended without ending it (a retry, another step) queues again.
    func queueAgain(_ task: TaskRecord, in session: DaemonSession)
    /// Progress (or another push) for the holder of `session`.
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession)
    /// A download's progress, pushed as that of the tasks riding on it (`Coalescing`).
    func pushFollowerProgress(of download: DownloadTransfer, in session: DaemonSession)
}

/// The transfers libcurl runs now, by handle and by task: attached, stopped, ended, and
/// their progress pushed. What may start when is the `Scheduler`'s; how a task ends is
/// `TaskCompletion`'s. Owned by the daemon's loop thread.
final class RunningTransfers {
    private unowned let surroundings: any RunningTransfersSurroundings
    private let loop: EventLoop
    private let clock: any TimeSource
    // Transfers in flight, by libcurl handle and by task.
    var transfersByHandle: [ObjectIdentifier: any Transfer] = [:]
    var transfersByTask: [TaskKey: any Transfer] = [:]
    /// Empty files made on a thread of their own, given their names as downloads start.
    let spareFiles: SpareFiles

    init(surroundings: any RunningTransfersSurroundings, layout: ContainerLayout, loop: EventLoop, clock: any TimeSource) {
        self.surroundings = surroundings
        self.loop = loop
        self.clock = clock
        spareFiles = SpareFiles(directory: layout.daemonDirectory.path)
    }

    /// Removes an ended task's partial data, error page or upload files (cancel, failure,
    /// done) once its end is on disk: until then a power cut can bring the task back, and it
    /// must find its upload body.
    func removeTransferFiles(of task: TaskRecord, in session: DaemonSession) {
        let partial = session.partialPath(for: task)
        var files = [partial, DownloadTransfer.errorBodyPath(partialPath: partial)]
        if task.requestBodyLength != nil { files.append(session.requestBodyPath(for: task)) }
        if task.kind == .upload {
            files += [session.uploadBodyPath(for: task), session.uploadResponsePath(for: task)]
        }
        session.removeAfterCommit(files)
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
        if let session = surroundings.sessions[key.session], var task = session.tasks[key.task] {
            let known = transfer.task
            task.countOfBytesReceived = known.countOfBytesReceived
            task.countOfBytesExpectedToReceive = known.countOfBytesExpectedToReceive
            task.countOfBytesSent = known.countOfBytesSent
            task.countOfBytesExpectedToSend = known.countOfBytesExpectedToSend
            task.validator = known.validator
            task.response = known.response
            task.uploadResumption = known.uploadResumption
            session.update(task)
        }
    }

    /// libcurl finished a transfer, well or not.
    func transferEnded(_ easy: CurlEasy, _ result: Result<Void, CurlError>) {
        guard let transfer = transfersByHandle.removeValue(forKey: ObjectIdentifier(easy)) else { return }
        let key = TaskKey(session: transfer.session, task: transfer.task.taskIdentifier)
        CrashGuard.working(on: CrashGuard.note(for: key))
        defer { CrashGuard.idle() }
        transfersByTask.removeValue(forKey: key) // libcurl has already taken it out of the multi
        surroundings.transferSlotFreed(by: transfer.task)
        guard let session = surroundings.sessions[transfer.session], session.tasks[key.task] != nil else {
            transfer.close()
            return
        }
        if case .success = result { pushProgress(of: transfer, in: session, now: clock.now, evenIfRecent: true) }
        switch transfer {
        case let download as DownloadTransfer: surroundings.downloadEnded(download, result, in: session)
        case let upload as UploadTransfer: surroundings.uploadEnded(upload, result, in: session)
        default: preconditionFailure("unknown transfer \(type(of: transfer))")
        }
        // Not finished (a retry, another step of an upload): it queues again.
        if let task = session.tasks[key.task] { surroundings.queueAgain(task, in: session) }
    }

    /// Pushes progress of running transfers to attached clients, at most every 100 ms per task (S7.3).
    func reportProgress(now: Date) {
        for transfer in transfersByHandle.values {
            guard let session = surroundings.sessions[transfer.session] else { continue }
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
        surroundings.pushToHolder(.progress(session: session.key.identifier, progress), of: session)
        if let download = transfer as? DownloadTransfer { surroundings.pushFollowerProgress(of: download, in: session) }
    }
}
