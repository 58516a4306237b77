import Foundation
import TransferContainer

/// What the task lifecycle (`TaskLifecycle`) asks the daemon to do: the decision as a value,
/// carried out by the parts that own the loop, the transfers, the records and the processes
/// (`TaskCompletion.carryOut`, `Relauncher`). A value type; any thread.
enum LifecycleAction: Equatable {
    /// The task waits (its record as given is kept, and the hold logged as a typed fact).
    case hold(TaskRecord, TaskHold)
    /// The scheduler looks at every task again at this time (a retry comes due).
    case wake(at: Date)
    /// The task's transfer, if one runs, stops; what it learnt goes into the record first.
    case stopTransfer(taskIdentifier: Int)
    /// The task ends for good: its completion event (`TaskEnding`) is made durable, then delivered.
    case end(TaskRecord, TaskEnding)
    /// The app's resume rate limiter starts over (a quiet period as long as twice its delay).
    case resetLimiter(BundleIdentifier)
    /// The app is launched in the background for the session's events; its limiter is
    /// `limiter` afterwards, whether the launch starts or not (S6.5).
    case relaunch(BundleIdentifier, session: SessionIdentifier, limiter: RelaunchLimiter)
    /// The app launched for events outlived its background budget: it is killed (SIGKILL).
    case terminate(BundleIdentifier, pid: Int32)
}

/// How a task ends: the fields of its `taskCompleted` event. A value type; any thread.
enum TaskEnding: Equatable {
    /// A download whose body is in place under its finished name: `didFinishDownloadingTo`,
    /// then `didCompleteWithError(nil)`.
    case downloaded(file: String)
    /// An upload the server answered: `didReceive data` with its body, then `didCompleteWithError(nil)`.
    case uploaded(responseBody: Data?)
    /// `didCompleteWithError(failure)`; with resume data made from the bytes kept when
    /// `keepsResumeData` (S6.2). The task's transfer files go once the end is durable.
    case failed(TransferFailure, keepsResumeData: Bool)

    /// The finished file the event hands over, for a download that succeeded.
    var downloadedFile: String? {
        if case .downloaded(let file) = self { return file }
        return nil
    }

    /// The error the event carries (nil for a task that succeeded).
    var error: TransferFailure? {
        if case .failed(let failure, _) = self { return failure }
        return nil
    }

    /// The server's answer to an upload, for `didReceive data`.
    var responseBody: Data? {
        if case .uploaded(let body) = self { return body }
        return nil
    }
}
