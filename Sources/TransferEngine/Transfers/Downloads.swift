internal import Glibc
import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX
import TransferLogging

/// What downloads see of the rest of the daemon (on the loop thread), beyond an exchange's
/// needs: the sessions, delivery to holders, and the scheduler's look at the queue.
/// `TransferDaemon` answers (`TransferDaemon+DownloadsSurroundings.swift`).
protocol DownloadsSurroundings: ExchangeSurroundings {
    var sessions: [SessionKey: DaemonSession] { get }
    /// `didResume` for the holder of `session`.
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession)
    /// The scheduler looks at every task again (a download starts over from zero).
    func requestScheduling()
}

/// Download tasks in the daemon: where their bytes lie, how a download starts, resumes and
/// ends (S2, S6). The exchange itself is `DownloadTransfer`'s. Owned by the daemon's loop thread.
final class Downloads {
    private unowned let surroundings: any DownloadsSurroundings
    private let transfers: RunningTransfers
    private let completion: TaskCompletion
    private let coalescing: Coalescing
    /// The container's root, through which every file is opened (read too by the request
    /// body's helpers, in their own file).
    let root: RootDirectory
    private let log: TransferLog
    private let clock: any TimeSource
    /// Bytes a download leaves free on the container's file system (`Options.freeSpaceReserve`).
    private let freeSpaceReserve: Int64
    /// A testing aid: a response with this header field traps (`Options.crashOnResponseHeader`).
    private let crashOnResponseHeader: String?

    init(surroundings: any DownloadsSurroundings, transfers: RunningTransfers, completion: TaskCompletion, coalescing: Coalescing,
         root: RootDirectory, log: TransferLog, clock: any TimeSource, freeSpaceReserve: Int64, crashOnResponseHeader: String?) {
        self.surroundings = surroundings
        self.transfers = transfers
        self.completion = completion
        self.coalescing = coalescing
        self.root = root
        self.log = log
        self.clock = clock
        self.freeSpaceReserve = freeSpaceReserve
        self.crashOnResponseHeader = crashOnResponseHeader
    }

    func startDownload(_ task: TaskRecord, in session: DaemonSession) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        do {
            let partial = session.partialPath(for: task)
            // The folder is opened from the container's root without following a symlink on
            // the way, and the file in that folder as opened: a client that plants a link
            // anywhere cannot have the download written outside its container.
            let folder = try root.openMakingDirectory(session.downloadsDirectory)
            defer { folder.close() }
            let name = PathText.lastComponent(of: partial)
            let file = try transfers.spareFiles.take(as: name, in: folder) // unless there is one: resume from it
                ?? folder.openBeneath(name, O_WRONLY | O_CREAT)
            let transfer = try DownloadTransfer(session: session.key, task: task, partialPath: partial, file: file, root: root, configuration: session.record.configuration,
                                                credentials: surroundings.credentials(for: task, in: session), freeSpaceReserve: freeSpaceReserve,
                                                tls: surroundings.tlsPolicy(for: task, in: session), cookies: surroundings.cookieJar(for: session),
                                                requestBody: requestBody(of: task, in: session))
            transfer.onResponse = { [unowned self, unowned session] task in
                if let name = crashOnResponseHeader, task.response?.header(name) != nil {
                    fatalError("transferd: the response carries \(name) (--fault-crash-on-response-header)")
                }
                session.update(task)
            }
            transfer.onCheckpoint = { [unowned session] task in session.update(task) }
            transfer.onResumed = { [unowned self, unowned session] task, offset in
                var task = task
                task.reportsResumeOffset = false
                session.update(task)
                surroundings.pushToHolder(.didResume(session: session.key.identifier, taskIdentifier: task.taskIdentifier, offset: offset, expectedTotalBytes: task.countOfBytesExpectedToReceive), of: session)
            }
            try transfers.attach(transfer, for: key)
            log.info("transfers", "started at offset \(transfer.bytesOnDisk)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        } catch {
            let failure = error as? TransferFailure // a request body that cannot be read says so itself
                ?? TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot start the download: \(error)", subject: session.partialPath(for: task))
            completion.fail(task, in: session, failure)
        }
    }

    /// libcurl finished a download, well or not.
    func downloadEnded(_ transfer: DownloadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {
        let key = TaskKey(session: transfer.session, task: transfer.task.taskIdentifier)
        let succeeded: Bool
        if case .success = result { succeeded = true } else { succeeded = false }
        var task = transfer.finish(success: succeeded) { session.syncBeforeCommit($0, path: transfer.bodyPath) }

        if transfer.mustRestartFromZero {
            try? root.truncate(transfer.partialPath, to: 0)
            task.validator = nil
            task.countOfBytesReceived = 0
            session.update(task)
            log.notice("transfers", "server answered an unexpected range; starting over from zero", session: session.key.identifier.rawValue, task: key.task)
            surroundings.requestScheduling()
            return
        }
        if let failure = transfer.diskFailure ?? transfer.protocolFailure {
            completion.transferEnded(task, .failed(failure), in: session)
            return
        }
        if case .success = result, let wait = transfer.serverWait(now: clock.now) {
            // The server asks us to come back later; the bytes on disk stay (S6.4).
            try? root.remove(transfer.errorBodyPath)
            completion.retryOrFail(transfer.taskWithoutErrorPage, in: session, after: wait)
            return
        }
        if case .success = result, transfer.bodyIsErrorResponse, surroundings.takeChallenge(task, in: session) { return }
        if transfer.tunnelNeedsProxyCredentials, surroundings.takeChallenge(task, in: session) { return } // 407 to CONNECT
        switch result {
        case .success:
            // No record of its own: the completion event carries the task as it ended, and the
            // body takes its final name once that event is on disk (`DaemonSession.complete`).
            if transfer.bodyIsErrorResponse { try? root.remove(transfer.partialPath) }
            let body = session.bodyPath(ofFinished: task)
            if transfer.bodyPath != body {
                // A whole file completed by a 416 while the task's recorded answer is an error's
                // (a challenge answered before): the body lies where that answer says.
                try? root.rename(transfer.bodyPath, to: body)
            }
            coalescing.completeFollowers(of: transfer, body: body, in: session)
            completeDownload(task, in: session)
        case .failure(let error):
            completion.retryOrFail(transfer.taskWithoutErrorPage, in: session, error)
        }
    }

    /// Announces a finished download: durable event, then delivery to the holder.
    func completeDownload(_ task: TaskRecord, in session: DaemonSession) {
        completion.transferEnded(task, .downloaded(file: session.finishedPath(for: task)), in: session)
    }
}
