internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// The request body of a download task (a POST that answers with a file): kept beside the
/// task in the session's cache folder, durable before the task is accepted, and read again
/// for each attempt (first, retries, resumes after a restart, answers to challenges). On the
/// daemon's loop thread, as `Downloads`.
extension Downloads {
    func requestBodyPath(for task: TaskRecord, in session: DaemonSession) -> String {
        session.downloadsPath("task-\(task.taskIdentifier).body")
    }

    /// At creation: writes `body` to the task's body file, synced with the commit that accepts
    /// the task (a power cut keeps neither or both). Returns why the task will fail instead.
    func keepRequestBody(_ body: Data, of task: TaskRecord, in session: DaemonSession) -> TransferFailure? {
        let path = requestBodyPath(for: task, in: session)
        do {
            try DurableFile.makeDirectory(session.downloadsDirectory)
            let folder = try FileDescriptor.openDirectory(session.downloadsDirectory)
            defer { folder.close() }
            let file = try folder.openBeneath((path as NSString).lastPathComponent, O_WRONLY | O_CREAT | O_TRUNC)
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
        let path = requestBodyPath(for: task, in: session)
        let folder = try FileDescriptor.openDirectory(session.downloadsDirectory)
        defer { folder.close() }
        let file = try folder.openBeneath((path as NSString).lastPathComponent, O_RDONLY | O_NOFOLLOW)
        defer { file.close() }
        let size = try file.size()
        guard size <= Int64(TransferLimits.requestBodyBytes), size == task.requestBodyLength else {
            throw TransferFailure(code: TransferFailure.cannotOpenFile, message: "the request body kept at \(path) has \(size) bytes, not the \(task.requestBodyLength ?? 0) the task was created with", subject: path)
        }
        var body = Data(count: Int(size))
        let read = try body.withUnsafeMutableBytes { buffer throws(Errno) -> Int in
            var done = 0
            while done < buffer.count, case let count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: Int64(done)), count > 0 {
                done += count
            }
            return done
        }
        guard read == body.count else {
            throw TransferFailure(code: TransferFailure.cannotOpenFile, message: "the request body kept at \(path) ended after \(read) of its \(size) bytes", subject: path)
        }
        return body
    }
}
