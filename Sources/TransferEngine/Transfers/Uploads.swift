internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// Upload tasks in the daemon: the body taken into the daemon's keeping, each step of a
/// (resumable) upload started and ended (S2.5, S6.3). The exchange itself is
/// `UploadTransfer`'s. Owned by the daemon's loop thread.
final class Uploads {
    unowned let daemon: TransferDaemon

    init(daemon: TransferDaemon) {
        self.daemon = daemon
    }

    /// The daemon's own link to the app's file: the upload finishes even if the process that
    /// started it has exited and removed its copy.
    func uploadBodyPath(for task: TaskRecord, in session: DaemonSession) -> String {
        session.downloadsPath("task-\(task.taskIdentifier).upload")
    }

    /// Where the server's answer is kept until it is announced.
    func uploadResponsePath(for task: TaskRecord, in session: DaemonSession) -> String {
        session.downloadsPath("task-\(task.taskIdentifier).upload-response")
    }

    /// At creation: checks the app's file (it must exist, be a regular file the app may read,
    /// inside a container of the app's) and links it where the daemon keeps upload bodies.
    /// Returns why the task will fail instead, with the `URLError` code Apple uses.
    func takeUploadBody(_ path: String?, into task: inout TaskRecord, in session: DaemonSession, for identity: AppIdentity) -> TransferFailure? {
        guard let path, !path.isEmpty else {
            return TransferFailure(code: TransferFailure.fileDoesNotExist, message: "an upload task needs a file to upload")
        }
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let error = Errno.current("lstat", path: path)
            if error.code == ENOENT || error.code == ENOTDIR {
                return TransferFailure(code: TransferFailure.fileDoesNotExist, message: "cannot read file at \(path): it does not exist", subject: path)
            }
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot read file at \(path): \(error)", subject: path)
        }
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return TransferFailure(code: TransferFailure.fileIsDirectory, message: "cannot upload \(path): it is a directory", subject: path)
        default: return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot upload \(path): not a regular file", subject: path)
        }
        // The app runs as the file's owner: without the owner's read bit it could not read
        // the file itself (even when the daemon, say as root, could).
        guard st.st_mode & S_IRUSR != 0 else {
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot read file at \(path): permission denied", subject: path)
        }
        guard let source = daemon.resumeData.allowedFile(path, for: identity) else {
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot upload \(path): it is not in a container \(identity.bundleIdentifier) may read", subject: path)
        }
        let readable: FileDescriptor
        do { readable = try FileDescriptor.open(source, O_RDONLY | O_NONBLOCK) } catch {
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot read file at \(path): \(error)", subject: path)
        }
        readable.close()
        let destination = uploadBodyPath(for: task, in: session)
        do {
            try DurableFile.makeDirectory(session.downloadsDirectory)
            unlink(destination)
            if link(source, destination) != 0 {
                // Another file system: a copy is the only way to keep the bytes.
                try FileManager.default.copyItem(atPath: source, toPath: destination)
            }
            // The app's bytes may be in the page cache only, and the new name too: both are
            // made durable before the line that accepts the task (a power cut keeps neither).
            session.syncBeforeCommit(try FileDescriptor.open(destination, O_RDONLY), path: destination)
            session.syncBeforeCommit(directory: session.downloadsDirectory)
        } catch {
            return TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot keep the upload body of \(path): \(error)", subject: path)
        }
        task.uploadFile = destination
        task.countOfBytesExpectedToSend = Int64(st.st_size)
        return nil
    }

    func startUpload(_ task: TaskRecord, in session: DaemonSession, step: UploadTransfer.Step, conflicts: Int = 0) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        let sessionName = session.key.identifier.rawValue
        do {
            try DurableFile.makeDirectory(session.downloadsDirectory)
            let transfer = try UploadTransfer(session: session.key, task: task, step: step, bodyPath: task.uploadFile.flatMap(session.resolvedPath), responsePath: uploadResponsePath(for: task, in: session),
                                              configuration: session.record.configuration, credentials: daemon.challenges.credentials(for: task, in: session), conflicts: conflicts, retryPolicy: daemon.retryPolicy,
                                              tls: daemon.serverTrust.tlsPolicy(for: task, in: session))
            transfer.onResumptionOffered = { [unowned self, unowned session] task in
                session.update(task)
                daemon.log.info("transfers", "server keeps the upload at \(task.uploadResumption?.location ?? "?") (interop version \(task.uploadResumption?.interopVersion ?? 0))", session: sessionName, task: task.taskIdentifier)
            }
            try daemon.transfers.attach(transfer, for: key)
            switch step {
            case .create: daemon.log.info("transfers", "started upload of \(transfer.task.countOfBytesExpectedToSend) bytes", session: sessionName, task: task.taskIdentifier)
            case .retrieveOffset: daemon.log.info("transfers", "asking the server how much of the upload it has", session: sessionName, task: task.taskIdentifier)
            case .append(let offset): daemon.log.info("transfers", "resuming the upload at \(offset) bytes", session: sessionName, task: task.taskIdentifier)
            }
        } catch let failure as TransferFailure {
            daemon.completion.fail(task, in: session, failure)
        } catch let error as Errno {
            let code = error.code == ENOENT ? TransferFailure.fileDoesNotExist : TransferFailure.noPermissionsToReadFile
            daemon.completion.fail(task, in: session, TransferFailure(code: code, message: "cannot read the upload body: \(error)", subject: task.uploadFile))
        } catch {
            daemon.completion.fail(task, in: session, TransferFailure(code: TransferFailure.unknown, message: "cannot start the upload: \(error)", subject: task.originalRequest.url))
        }
    }

    /// libcurl finished one exchange of an upload: go on, retry, or announce the answer.
    func uploadEnded(_ transfer: UploadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {
        let outcome = transfer.finish(result)
        var task = transfer.task
        let sessionName = session.key.identifier.rawValue
        if let failure = transfer.diskFailure {
            daemon.completion.fail(task, in: session, failure)
            return
        }
        switch outcome {
        case .completed:
            if daemon.challenges.takeChallenge(task, in: session) { return }
            if transfer.responseBytesDropped > 0 {
                daemon.log.error("transfers", "the server's answer exceeds \(UploadTransfer.responseBodyLimit) bytes; \(transfer.responseBytesDropped) bytes not delivered", session: sessionName, task: task.taskIdentifier)
            }
            completeUpload(task, responseBody: transfer.responseBody(), in: session)
        case .next(let step):
            session.updateInMemory(task)
            let conflicts = step == .retrieveOffset ? transfer.conflicts + 1 : transfer.conflicts
            if step == .retrieveOffset { daemon.log.notice("transfers", "the server disagrees about the upload offset (409); asking it again", session: sessionName, task: task.taskIdentifier) }
            startUpload(task, in: session, step: step, conflicts: conflicts)
        case .restartFromZero(let reason):
            task.uploadResumption = nil
            task.countOfBytesSent = 0
            session.update(task)
            daemon.log.notice("transfers", "\(reason); sending the whole body again", session: sessionName, task: task.taskIdentifier)
            startUpload(task, in: session, step: .create)
        case .retryAfter(let wait):
            unlink(transfer.responsePath)
            daemon.completion.retryLater(task, in: session, after: wait, reason: "HTTP 503, Retry-After \(String(format: "%.0f", wait)) s")
        case .transportFailure(let error):
            if task.uploadResumption == nil { task.countOfBytesSent = 0 }
            session.updateInMemory(task)
            daemon.completion.retryOrFail(task, in: session, error)
        }
    }

    /// Announces a finished upload with the server's answer (`didReceive data`, then
    /// `didCompleteWithError(nil)`); the daemon's copy of the body goes.
    func completeUpload(_ task: TaskRecord, responseBody: Data?, in session: DaemonSession) {
        if daemon.completion.end(task, in: session, responseBody: responseBody, note: "finished: HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesSent) bytes sent") {
            daemon.transfers.removeTransferFiles(of: task, in: session)
        }
    }
}
