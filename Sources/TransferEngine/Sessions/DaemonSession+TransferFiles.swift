import Foundation
import TransferContainer
import TransferLogging
import TransferPOSIX
import TransferTransport

/// Where a task's transfer files lie in its session's downloads folder: named after the task,
/// so that a restart finds them from the record alone. The session's owner (the daemon's loop
/// thread) reads and writes the files.
extension DaemonSession {
    /// A download's bytes so far.
    func partialPath(for task: TaskRecord) -> String {
        downloadsPath("task-\(task.taskIdentifier).partial")
    }

    /// The finished file handed to `didFinishDownloadingTo`: named after the task, and given
    /// once the task's completion event is on disk (`DaemonSession.complete`).
    func finishedPath(for task: TaskRecord) -> String {
        downloadsPath(Self.finishedName(for: task))
    }

    static func finishedName(for task: TaskRecord) -> String {
        "CFNetworkDownload_\(task.taskIdentifier).tmp"
    }

    /// Where a finished download's body lies until its completion event is durable (it is
    /// then renamed to `finishedPath`): the error page's file when the answer the task ended
    /// with is not a 2xx (`DownloadTransfer.bodyPath`), else the partial file.
    func bodyPath(ofFinished task: TaskRecord) -> String {
        let partial = partialPath(for: task)
        guard let status = task.response?.statusCode, !(200..<300).contains(status) else { return partial }
        return DownloadTransfer.errorBodyPath(partialPath: partial)
    }

    /// Renames what the rename after a commit did not reach (the daemon died right after the
    /// commit, or a power cut took the rename back): an undelivered event names its finished
    /// file, and the body still lies under its working name. One listing of the folder, not a
    /// look per event. When neither is there, the holder took the file already.
    func nameFinishedDownloads(root: RootDirectory, log: TransferLog) {
        guard events.values.contains(where: { $0.downloadedFile != nil }), let names = try? root.names(in: downloadsDirectory) else { return }
        let present = Set(names)
        for event in events.values {
            guard let stored = event.downloadedFile, let finished = resolvedPath(stored),
                  (finished as NSString).deletingLastPathComponent == downloadsDirectory,
                  !present.contains((finished as NSString).lastPathComponent) else { continue }
            let body = bodyPath(ofFinished: event.task)
            guard present.contains((body as NSString).lastPathComponent) else { continue }
            do {
                try root.rename(body, to: finished)
                log.notice("store", "event \(event.number): the finished download takes its name \((finished as NSString).lastPathComponent) now (the daemon stopped between its commit and the rename)", session: key.identifier.rawValue, task: event.task.taskIdentifier,
                           event: LogEvent(.finishedFileNamedAtLoad))
            } catch {
                log.error("store", "event \(event.number): cannot rename \(body) to \(finished): \(error)", session: key.identifier.rawValue, task: event.task.taskIdentifier)
            }
        }
    }

    /// The daemon's own link to the app's file: the upload finishes even if the process that
    /// started it has exited and removed its copy.
    func uploadBodyPath(for task: TaskRecord) -> String {
        downloadsPath("task-\(task.taskIdentifier).upload")
    }

    /// Where the server's answer to an upload is kept until it is announced.
    func uploadResponsePath(for task: TaskRecord) -> String {
        downloadsPath("task-\(task.taskIdentifier).upload-response")
    }

    /// A download task's request body (a POST that answers with a file), kept for every
    /// attempt; the one the app gave in `willBeginDelayedRequest` has a name of its own.
    func requestBodyPath(for task: TaskRecord) -> String {
        downloadsPath("task-\(task.taskIdentifier).\(task.requestBodyReplaced == true ? "new-body" : "body")")
    }
}
