internal import Glibc
import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX
import TransferLogging

/// Upload tasks in the daemon: the body taken into the daemon's keeping, each step of a
/// (resumable) upload started and ended (S2.5, S6.3). The exchange itself is
/// `UploadTransfer`'s. Owned by the daemon's loop thread. What it needs from outside the
/// transfer layer is an exchange's needs (`ExchangeSurroundings`).
final class Uploads {
    private unowned let surroundings: any ExchangeSurroundings
    private let transfers: RunningTransfers
    private let completion: TaskCompletion
    private let resumeData: ResumeDataStore
    private let root: RootDirectory
    private let log: TransferLog
    private let clock: any TimeSource
    /// Which failed exchanges are tried again (a resumable upload's steps judge by it).
    private let retryPolicy: RetryPolicy

    init(surroundings: any ExchangeSurroundings, transfers: RunningTransfers, completion: TaskCompletion, resumeData: ResumeDataStore,
         root: RootDirectory, log: TransferLog, clock: any TimeSource, retryPolicy: RetryPolicy) {
        self.surroundings = surroundings
        self.transfers = transfers
        self.completion = completion
        self.resumeData = resumeData
        self.root = root
        self.log = log
        self.clock = clock
        self.retryPolicy = retryPolicy
    }

    /// At creation: checks the app's file (it must exist, be a regular file the app may read,
    /// inside a container of the app's) and links it where the daemon keeps upload bodies.
    /// Returns why the task will fail instead, with the `URLError` code Apple uses.
    func takeUploadBody(_ path: String?, into task: inout TaskRecord, in session: DaemonSession, for identity: AppIdentity) -> TransferFailure? {
        guard let path, !path.isEmpty else {
            return TransferFailure(code: TransferFailure.fileDoesNotExist, message: "an upload task needs a file to upload")
        }
        guard let source = resumeData.allowedFile(path, for: identity) else {
            var st = stat()
            if lstat(path, &st) != 0, errno == ENOENT || errno == ENOTDIR {
                return TransferFailure(code: TransferFailure.fileDoesNotExist, message: "cannot read file at \(path): it does not exist", subject: path)
            }
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot upload \(path): it is not in a container \(identity.bundleIdentifier) may read", subject: path)
        }
        // Opened from the container's root without following a symlink anywhere on the way,
        // and checked on that descriptor: a file or folder swapped for a link after a check
        // by path would otherwise get through.
        let readable: FileDescriptor
        let st: stat
        do throws(Errno) {
            readable = try root.open(source, O_RDONLY | O_NONBLOCK)
            do { st = try readable.status() } catch { readable.close(); throw error }
        } catch {
            if error.code == ENOENT || error.code == ENOTDIR {
                return TransferFailure(code: TransferFailure.fileDoesNotExist, message: "cannot read file at \(path): it does not exist", subject: path)
            }
            let reason = error.code == ELOOP ? "a symlink is on its way" : "\(error)"
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot read file at \(path): \(reason)", subject: path)
        }
        if let refusal = refusal(of: st, at: path, in: session) {
            readable.close()
            return refusal
        }
        let destination = session.uploadBodyPath(for: task)
        do {
            try root.makeDirectory(session.downloadsDirectory)
            let folder = try root.openDirectory(session.downloadsDirectory)
            defer { folder.close() }
            let name = (destination as NSString).lastPathComponent
            unlinkat(folder.rawValue, name, 0)
            do { try readable.link(as: name, in: folder) } catch {
                // Another file system: a copy, from the descriptor checked, is the only way to keep the bytes.
                let copy = try folder.openBeneath(name, O_WRONLY | O_CREAT | O_EXCL)
                defer { copy.close() }
                try readable.copyAll(to: copy)
            }
            // The app's bytes may be in the page cache only, and the new name too: both are
            // made durable before the line that accepts the task (a power cut keeps neither).
            session.syncBeforeCommit(readable, path: destination)
            session.syncBeforeCommit(directory: session.downloadsDirectory)
        } catch {
            readable.close()
            return TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot keep the upload body of \(path): \(error)", subject: path)
        }
        task.uploadFile = destination
        task.countOfBytesExpectedToSend = Int64(st.st_size)
        return nil
    }

    /// Why the file open at `path`, described by `st`, is not one the app may upload: not a
    /// regular file, not readable by its owner, not the user's, or with another name
    /// somewhere (a hard link made to another app's private file); nil when it may.
    private func refusal(of st: stat, at path: String, in session: DaemonSession) -> TransferFailure? {
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
        guard st.st_uid == geteuid() else {
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot upload \(path): it belongs to uid \(st.st_uid)", subject: path)
        }
        guard st.st_nlink == 1 || Int(st.st_nlink) == 1 + ownLinks(to: st, in: session) else {
            return TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot upload \(path): it has \(st.st_nlink) names (a hard link may lead outside the app's containers)", subject: path)
        }
        return nil
    }

    /// Names the daemon gave the file itself: this session's unfinished uploads of it. Looked
    /// for only when a file has more than one name.
    private func ownLinks(to st: stat, in session: DaemonSession) -> Int {
        session.tasks.values.count { task in
            guard task.kind == .upload, let other = try? root.status(session.uploadBodyPath(for: task)) else { return false }
            return other.st_dev == st.st_dev && other.st_ino == st.st_ino
        }
    }

    func startUpload(_ task: TaskRecord, in session: DaemonSession, step: UploadTransfer.Step, conflicts: Int = 0) {
        let key = TaskKey(session: session.key, task: task.taskIdentifier)
        let sessionName = session.key.identifier.rawValue
        do {
            try root.makeDirectory(session.downloadsDirectory)
            let transfer = try UploadTransfer(session: session.key, task: task, step: step, bodyPath: task.uploadFile.flatMap(session.resolvedPath), responsePath: session.uploadResponsePath(for: task),
                                              configuration: session.record.configuration, credentials: surroundings.credentials(for: task, in: session), conflicts: conflicts, retryPolicy: retryPolicy,
                                              tls: surroundings.tlsPolicy(for: task, in: session), cookies: surroundings.cookieJar(for: session), root: root)
            transfer.onResumptionOffered = { [unowned self, unowned session] task in
                session.update(task)
                log.info("transfers", "server keeps the upload at \(task.uploadResumption?.location ?? "?") (interop version \(task.uploadResumption?.interopVersion ?? 0))", session: sessionName, task: task.taskIdentifier)
            }
            try transfers.attach(transfer, for: key)
            switch step {
            case .create: log.info("transfers", "started upload of \(transfer.task.countOfBytesExpectedToSend) bytes", session: sessionName, task: task.taskIdentifier)
            case .retrieveOffset: log.info("transfers", "asking the server how much of the upload it has", session: sessionName, task: task.taskIdentifier)
            case .append(let offset): log.info("transfers", "resuming the upload at \(offset) bytes", session: sessionName, task: task.taskIdentifier)
            }
        } catch let failure as TransferFailure {
            completion.fail(task, in: session, failure)
        } catch let error as Errno {
            let code = error.code == ENOENT ? TransferFailure.fileDoesNotExist : TransferFailure.noPermissionsToReadFile
            completion.fail(task, in: session, TransferFailure(code: code, message: "cannot read the upload body: \(error)", subject: task.uploadFile))
        } catch {
            completion.fail(task, in: session, TransferFailure(code: TransferFailure.unknown, message: "cannot start the upload: \(error)", subject: task.originalRequest.url))
        }
    }

    /// libcurl finished one exchange of an upload: go on, retry, or announce the answer.
    func uploadEnded(_ transfer: UploadTransfer, _ result: Result<Void, CurlError>, in session: DaemonSession) {
        let outcome = transfer.finish(result, now: clock.now)
        var task = transfer.task
        let sessionName = session.key.identifier.rawValue
        if let failure = transfer.diskFailure {
            completion.transferEnded(task, .failed(failure), in: session)
            return
        }
        switch outcome {
        case .completed:
            if surroundings.takeChallenge(task, in: session) { return }
            if transfer.responseBytesDropped > 0 {
                log.error("transfers", "the server's answer exceeds \(UploadTransfer.responseBodyLimit) bytes; \(transfer.responseBytesDropped) bytes not delivered", session: sessionName, task: task.taskIdentifier)
            }
            completeUpload(task, responseBody: transfer.responseBody(), in: session)
        case .next(let step):
            session.updateInMemory(task)
            let conflicts = step == .retrieveOffset ? transfer.conflicts + 1 : transfer.conflicts
            if step == .retrieveOffset { log.notice("transfers", "the server disagrees about the upload offset (409); asking it again", session: sessionName, task: task.taskIdentifier) }
            startUpload(task, in: session, step: step, conflicts: conflicts)
        case .restartFromZero(let reason):
            task.uploadResumption = nil
            task.countOfBytesSent = 0
            session.update(task)
            log.notice("transfers", "\(reason); sending the whole body again", session: sessionName, task: task.taskIdentifier)
            startUpload(task, in: session, step: .create)
        case .serverWait(let wait):
            try? root.remove(transfer.responsePath)
            completion.retryOrFail(task, in: session, after: wait)
        case .transportFailure(let error):
            if task.uploadResumption == nil { task.countOfBytesSent = 0 }
            session.updateInMemory(task)
            completion.retryOrFail(task, in: session, error)
        }
    }

    /// Announces a finished upload with the server's answer (`didReceive data`, then
    /// `didCompleteWithError(nil)`); the daemon's copy of the body goes.
    func completeUpload(_ task: TaskRecord, responseBody: Data?, in session: DaemonSession) {
        completion.transferEnded(task, .uploaded(responseBody: responseBody), in: session)
    }
}
