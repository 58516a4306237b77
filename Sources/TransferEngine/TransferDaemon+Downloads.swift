internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// Downloads: where their bytes wait, how a finished one is announced.
extension TransferDaemon {
    func partialPath(for task: TaskRecord, in session: DaemonSession) -> String {
        session.downloadsPath("task-\(task.taskIdentifier).partial")
    }

    /// The finished file handed to `didFinishDownloadingTo`: named after the task, so that a
    /// restart finds a download that was finished but not yet announced.
    func finishedPath(for task: TaskRecord, in session: DaemonSession) -> String {
        session.downloadsPath("CFNetworkDownload_\(task.taskIdentifier).tmp")
    }

    /// After a restart: announces downloads finished before the kill; running tasks start again.
    func recoverTasks() {
        for session in sessions.values {
            for task in session.unfinishedTasks where FileManager.default.fileExists(atPath: finishedPath(for: task, in: session)) {
                completeDownload(task, in: session)
            }
        }
    }

    func startDownload(_ task: TaskRecord, in session: DaemonSession) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        do {
            try DurableFile.makeDirectory(session.downloadsDirectory)
            let partial = partialPath(for: task, in: session)
            let spare = spareFiles.take(to: partial) // unless there is one: resume from it
            let transfer = try DownloadTransfer(session: session.key, task: task, partialPath: partial, emptyFile: spare, configuration: session.record.configuration,
                                                credentials: credentials(for: task, in: session), freeSpaceReserve: options.freeSpaceReserve)
            transfer.onResponse = { [unowned self, unowned session] task in
                if let name = options.crashOnResponseHeader, task.response?.header(name) != nil {
                    fatalError("transferd: the response carries \(name) (BGTRANSFER_FAULT_CRASH_ON_RESPONSE_HEADER)")
                }
                do { try session.update(task) } catch { log.error("store", "cannot record response: \(error)", session: session.key.identifier.rawValue, task: task.taskIdentifier) }
            }
            transfer.onCheckpoint = { [unowned session] task in try? session.update(task) }
            transfer.onResumed = { [unowned self, unowned session] task, offset in
                var task = task
                task.reportsResumeOffset = false
                try? session.update(task)
                push(.didResume(session: session.key.identifier, taskIdentifier: task.taskIdentifier, offset: offset, expectedTotalBytes: task.countOfBytesExpectedToReceive), to: session)
            }
            try attach(transfer, for: key)
            log.info("transfers", "started at offset \(transfer.bytesOnDisk)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        } catch {
            let failure = TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot start the download: \(error)", subject: partialPath(for: task, in: session))
            fail(task, in: session, failure)
        }
    }

    /// libcurl finished a download, well or not.
    func downloadEnded(_ transfer: DownloadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {
        let key = TaskKey(session: transfer.session, task: transfer.task.taskIdentifier)
        let succeeded: Bool
        if case .success = result { succeeded = true } else { succeeded = false }
        var task = transfer.finish(success: succeeded) { session.syncBeforeCommit($0, path: transfer.bodyPath) }

        if transfer.mustRestartFromZero {
            truncate(transfer.partialPath, 0)
            task.validator = nil
            task.countOfBytesReceived = 0
            try? session.update(task)
            log.notice("transfers", "server answered an unexpected range; starting over from zero", session: session.key.identifier.rawValue, task: key.task)
            scheduleTransfers()
            return
        }
        if var failure = transfer.diskFailure ?? transfer.protocolFailure {
            // Bytes that could not be written for want of space stay as resume data (S6.2).
            if failure.code == TransferFailure.cannotWriteToFile { failure.resumeData = makeResumeData(for: task, in: session) }
            fail(task, in: session, failure)
            return
        }
        if case .success = result, let wait = transfer.retryAfter {
            // 503 with Retry-After: the server asks us to come back; the bytes on disk stay (S6.4).
            unlink(transfer.errorBodyPath)
            retryLater(task, in: session, after: wait, reason: "HTTP 503, Retry-After \(String(format: "%.0f", wait)) s")
            return
        }
        if case .success = result, transfer.bodyIsErrorResponse, takeChallenge(task, in: session) { return }
        switch result {
        case .success:
            do {
                // No record of its own: the completion event carries the task as it ended.
                if transfer.bodyIsErrorResponse { unlink(transfer.partialPath) }
                guard rename(transfer.bodyPath, finishedPath(for: task, in: session)) == 0 else { throw Errno.current("rename", path: transfer.bodyPath) }
                completeFollowers(of: transfer, finishedFile: finishedPath(for: task, in: session), in: session)
                completeDownload(task, in: session)
            } catch {
                fail(task, in: session, TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot finish the download: \(error)", subject: transfer.partialPath))
            }
        case .failure(let error):
            retryOrFail(task, in: session, error)
        }
    }

    /// Announces a finished download: durable event, then delivery to the holder.
    func completeDownload(_ task: TaskRecord, in session: DaemonSession) {
        end(task, in: session, downloadedFile: finishedPath(for: task, in: session),
            note: "finished: HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesReceived) bytes")
    }
}
