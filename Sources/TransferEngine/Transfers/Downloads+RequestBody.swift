internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// The request body of a download task (a POST that answers with a file): kept beside the
/// task in the session's cache folder, durable before the task is accepted, and read again
/// for each attempt (first, retries, resumes after a restart, answers to challenges). On the
/// daemon's loop thread, as `Downloads`.
extension Downloads {
    /// At creation: writes `body` to the task's body file, synced with the commit that accepts
    /// the task (a power cut keeps neither or both). Returns why the task will fail instead.
    func keepRequestBody(_ body: Data, of task: TaskRecord, in session: DaemonSession) -> TransferFailure? {
        let path = session.requestBodyPath(for: task)
        do {
            // From the container's root, never through a symlink planted on the way.
            try root.makeDirectory(session.downloadsDirectory)
            let file = try root.open(path, O_WRONLY | O_CREAT | O_TRUNC)
            do { try file.writeAll(body) } catch { file.close(); throw error }
            session.syncBeforeCommit(file, path: path)
            session.syncBeforeCommit(directory: session.downloadsDirectory)
            return nil
        } catch {
            return TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot keep the request body of the download: \(error)", subject: path)
        }
    }

    /// The body to send with the task's request: nil for a task without one. Read whole (it
    /// is at most `TransferLimits.requestBodyBytes`); a file that is gone, or longer than that
    /// bound, fails the attempt rather than send another body.
    func requestBody(of task: TaskRecord, in session: DaemonSession) throws -> Data? {
        guard task.requestBodyLength != nil else { return nil }
        let path = session.requestBodyPath(for: task)
        // From the container's root, never through a symlink; read with the bound it was kept under.
        let body = try root.read(path, limit: TransferLimits.requestBodyBytes)
        guard Int64(body.count) == task.requestBodyLength else {
            throw TransferFailure(code: TransferFailure.cannotOpenFile, message: "the request body kept at \(path) has \(body.count) bytes, not the \(task.requestBodyLength ?? 0) the task was created with", subject: path)
        }
        return body
    }

    /// `.useNewRequest` in `willBeginDelayedRequest` (S5.1): `body` replaces the kept one,
    /// `.absent` leaves none. New bytes go to the task's other file (`task-N.new-body`),
    /// durable before the commit that names it: a power cut leaves the old record with the old
    /// file or the new record with the new one, never a mix. The old file goes after that
    /// commit. Returns why the task fails instead; `body` is within bounds (checked before).
    func replaceRequestBody(with body: NewRequestBody, of task: inout TaskRecord, in session: DaemonSession) -> TransferFailure? {
        let old = task.requestBodyLength == nil ? nil : session.requestBodyPath(for: task)
        var replaced = task
        replaced.requestBodyLength = nil
        replaced.requestBodyReplaced = nil
        if case .bytes(let bytes) = body {
            replaced.requestBodyReplaced = true
            replaced.requestBodyLength = Int64(bytes.count)
            if let failure = keepRequestBody(bytes, of: replaced, in: session) { return failure }
        }
        if let old, old != session.requestBodyPath(for: replaced) { session.removeAfterCommit([old]) }
        task = replaced
        return nil
    }
}
