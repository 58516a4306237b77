import Foundation
import TransferContainer

/// Where a task's transfer files lie in its session's downloads folder: named after the task,
/// so that a restart finds them from the record alone. Pure names; the session's owner
/// (the daemon's loop thread) reads and writes the files.
extension DaemonSession {
    /// A download's bytes so far.
    func partialPath(for task: TaskRecord) -> String {
        downloadsPath("task-\(task.taskIdentifier).partial")
    }

    /// The finished file handed to `didFinishDownloadingTo`: named after the task, so that a
    /// restart finds a download that was finished but not yet announced.
    func finishedPath(for task: TaskRecord) -> String {
        downloadsPath(Self.finishedName(for: task))
    }

    static func finishedName(for task: TaskRecord) -> String {
        "CFNetworkDownload_\(task.taskIdentifier).tmp"
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
