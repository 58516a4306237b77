internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

/// Resume data (S6.2): made from a stopped task's bytes, and taken back from an app that
/// resumes, checked against what the app may read. Owned by the daemon's loop thread.
final class ResumeDataStore {
    private let layout: ContainerLayout
    private let log: TransferLog
    /// The container's root, through which every file is reached without following a symlink.
    private let root: RootDirectory
    /// Which extensions an app has (their private containers are the app's to read too).
    private let registry: AppRegistry

    init(layout: ContainerLayout, root: RootDirectory, log: TransferLog, registry: AppRegistry) {
        self.layout = layout
        self.root = root
        self.log = log
        self.registry = registry
    }

    /// Whether a stopped download can be resumed later: a GET whose server sent a strong
    /// validator and accepts byte ranges, with bytes on disk (S6.1).
    func isResumable(_ task: TaskRecord, partial: String) -> Bool {
        return task.canResume(partialBytes: size(of: partial))
    }

    /// The size of the regular file at `path`, found without following a symlink; 0 otherwise.
    private func size(of path: String) -> Int64 {
        guard let st = try? root.status(path), st.st_mode & S_IFMT == S_IFREG else { return 0 }
        return Int64(st.st_size)
    }

    /// Sets a stopped download's partial data aside and describes it as resume data; nil when
    /// it cannot be resumed. The caller ends the task.
    func makeResumeData(for task: TaskRecord, in session: DaemonSession) -> Data? {
        if task.kind == .upload { return makeUploadResumeData(for: task, in: session) }
        let partial = session.partialPath(for: task)
        guard isResumable(task, partial: partial), let validator = task.validator else { return nil }
        guard let kept = setAside(partial, as: "partial", of: task, in: session) else { return nil }
        let bytes = size(of: kept)
        let data = ResumeData(url: task.requestToSend.url, bytesReceived: bytes, expectedTotalBytes: task.countOfBytesExpectedToReceive,
                              entityTag: validator.entityTag, lastModified: validator.lastModified, partialFile: layout.recordPath(kept), requestHeaders: task.requestToSend.headers)
        log.info("resume", "resume data made at \(bytes) bytes", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        return data.encoded()
    }

    /// An upload can be resumed when its server offered resumption (S6.6): its body is set
    /// aside with the upload's location; nil for a plain server.
    private func makeUploadResumeData(for task: TaskRecord, in session: DaemonSession) -> Data? {
        guard let resumption = task.uploadResumption, let body = task.uploadFile.flatMap(session.resolvedPath) else { return nil }
        guard let kept = setAside(body, as: "upload", of: task, in: session) else { return nil }
        let data = ResumeData(upload: resumption, url: task.requestToSend.url, httpMethod: task.requestToSend.httpMethod, bytesSent: task.countOfBytesSent,
                              totalBytes: task.countOfBytesExpectedToSend, bodyFile: layout.recordPath(kept), requestHeaders: task.requestToSend.headers)
        log.info("resume", "upload resume data made at \(task.countOfBytesSent) bytes sent", session: session.key.identifier.rawValue, task: task.taskIdentifier)
        return data.encoded()
    }

    /// Moves a task's file to `resume-<uuid>.<suffix>`, where resume data points (the task is
    /// about to end and would remove it); nil, logged, when it cannot.
    private func setAside(_ path: String, as suffix: String, of task: TaskRecord, in session: DaemonSession) -> String? {
        let kept = session.downloadsPath("resume-\(UUID().uuidString).\(suffix)")
        do { try root.rename(path, to: kept) } catch {
            log.error("resume", "cannot keep \(path) for resume data: \(error)", session: session.key.identifier.rawValue, task: task.taskIdentifier)
            return nil
        }
        return kept
    }

    /// Takes resume data for a new task: checks it, and moves its file (partial download or
    /// upload body) to the task's. Returns the reason the task will fail, if it will.
    func adoptResumeData(_ blob: Data, into task: inout TaskRecord, in session: DaemonSession, for identity: AppIdentity) -> TransferFailure? {
        let resume: ResumeData
        do { resume = try ResumeData(decoding: blob) } catch {
            return TransferFailure(code: TransferFailure.cannotDecodeContentData, message: error.description)
        }
        guard resume.kind == task.kind else {
            return TransferFailure(code: TransferFailure.cannotDecodeContentData, message: ResumeDataError.foreign("resume data of \(resume.kind.rawValue == "upload" ? "an upload" : "a download") cannot make \(task.kind.rawValue == "upload" ? "an upload" : "a download") task").description)
        }
        task.originalRequest = RequestRecord(url: resume.url, httpMethod: resume.httpMethod, headers: resume.requestHeaders)
        // The daemon names the file relative to the container (it may have moved since);
        // a default session's resume data names it absolutely.
        let named = ContainerLayout.isRelativeRecordPath(resume.partialFile) ? layout.resolveRecordPath(resume.partialFile) : resume.partialFile
        guard let named, let source = allowedFile(named, for: identity) else {
            return TransferFailure(code: TransferFailure.cannotDecodeContentData, message: ResumeDataError.foreign("its partial file \(resume.partialFile) is not in a container \(identity.bundleIdentifier) may use").description, subject: resume.partialFile)
        }
        // Looked at, renamed and truncated from the container's root, never through a symlink.
        let st: stat
        do { st = try root.status(source) } catch {
            let reason = error.code == ENOENT ? "its partial data is gone (resume data is single-use)" : "its partial file cannot be used: \(error)"
            return TransferFailure(code: TransferFailure.cannotOpenFile, message: ResumeDataError.stale(reason).description, subject: resume.partialFile)
        }
        guard st.st_mode & S_IFMT == S_IFREG, Int64(st.st_size) >= resume.bytesReceived else {
            return TransferFailure(code: TransferFailure.cannotOpenFile, message: ResumeDataError.stale("its partial file holds \(st.st_size) bytes, not the \(resume.bytesReceived) it describes").description, subject: resume.partialFile)
        }
        let destination = task.kind == .upload ? session.uploadBodyPath(for: task) : session.partialPath(for: task)
        do { try root.makeDirectory(session.downloadsDirectory) } catch {
            return TransferFailure(code: TransferFailure.cannotCreateFile, message: "\(error)", subject: session.downloadsDirectory)
        }
        do { try root.rename(source, to: destination) } catch {
            return TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot take the partial data: \(error)", subject: source)
        }
        if let upload = resume.upload {
            task.uploadFile = destination
            task.uploadResumption = upload
            task.countOfBytesSent = resume.bytesReceived
            task.countOfBytesExpectedToSend = Int64(st.st_size)
            return nil
        }
        try? root.truncate(destination, to: resume.bytesReceived)
        task.validator = resume.validator
        task.countOfBytesReceived = resume.bytesReceived
        task.countOfBytesExpectedToReceive = resume.expectedTotalBytes
        task.reportsResumeOffset = true
        return nil
    }

    /// The real path of a file if it lies where the app may read: its app groups, its own
    /// private container, or (for a containing app) those of its extensions.
    func allowedFile(_ path: String, for identity: AppIdentity) -> String? {
        guard path.hasPrefix("/"), let resolvedDirectory = realpath((path as NSString).deletingLastPathComponent, nil) else { return nil }
        defer { free(resolvedDirectory) }
        let real = String(cString: resolvedDirectory) + "/" + (path as NSString).lastPathComponent
        var roots = identity.appGroups.map { layout.appGroup($0).path }
        roots.append(layout.privateContainer(identity.bundleIdentifier).path)
        if identity.kind == .app {
            roots += registry.apps.values.filter { $0.identity.containingApp == identity.bundleIdentifier }.map { layout.privateContainer($0.identity.bundleIdentifier).path }
        }
        let resolvedRoots = roots.compactMap { root -> String? in
            guard let resolved = realpath(root, nil) else { return nil }
            defer { free(resolved) }
            return String(cString: resolved)
        }
        return resolvedRoots.contains { real.hasPrefix($0 + "/") } ? real : nil
    }
}
