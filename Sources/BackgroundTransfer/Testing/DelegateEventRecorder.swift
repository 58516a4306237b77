import TransferPOSIX

/// Writes the delegate calls a process receives, typed (`DelegateEvent`), for a test to read
/// back: the app calls it from its own delegate methods, with the same arguments. It writes
/// only while the container holds the folder a test made (`Testing/DelegateEvents/`), so it
/// can stay in shipped code and does nothing there. One JSON line a call, appended to a file
/// of the process's own; a SIGKILL loses no line already written. Thread-safe.
public enum DelegateEventRecorder {
    /// The folder, inside the container, a test creates to switch recording on.
    public static let folder = "Testing/DelegateEvents"

    private static let sequence = Locked(0)

    /// Records `urlSession(_:downloadTask:didFinishDownloadingTo:)`, with the file's size during the call.
    public static func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let size = (try? FileManager.default.attributesOfItem(atPath: location.path)[.size] as? NSNumber)?.int64Value
        record(.didFinishDownloadingTo, session: session, task: downloadTask, bytes: size)
    }

    /// Records `urlSession(_:task:didCompleteWithError:)`: code, cancelled reason and whether resume data came along.
    public static func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        record(.didCompleteWithError, session: session, task: task, error: error)
    }

    /// Records `urlSession(_:downloadTask:didWriteData:totalBytesWritten:totalBytesExpectedToWrite:)`.
    public static func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        record(.didWriteData, session: session, task: downloadTask, bytes: totalBytesWritten)
    }

    /// Records `urlSession(_:downloadTask:didResumeAtOffset:expectedTotalBytes:)`.
    public static func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {
        record(.didResumeAtOffset, session: session, task: downloadTask, bytes: fileOffset)
    }

    /// Records `urlSession(_:taskIsWaitingForConnectivity:)`.
    public static func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask) {
        record(.taskIsWaitingForConnectivity, session: session, task: task)
    }

    /// Records `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    public static func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        record(.didFinishEvents, session: session)
    }

    /// Records `urlSession(_:didBecomeInvalidWithError:)`.
    public static func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        record(.didBecomeInvalid, session: session, error: error)
    }

    /// Records the app delegate's `application(_:handleEventsForBackgroundURLSession:completionHandler:)`
    /// for session `identifier`: a launch or a wake, which starts a batch of events.
    public static func application(_ application: BackgroundApplication,
                                   handleEventsForBackgroundURLSession identifier: String) {
        record(.handleEventsForBackgroundURLSession, sessionIdentifier: identifier)
    }

    private static func record(_ kind: DelegateEvent.Kind, session: URLSession, task: URLSessionTask? = nil, error: Error? = nil, bytes: Int64? = nil) {
        record(kind, sessionIdentifier: session.configuration.identifier, task: task, error: error, bytes: bytes)
    }

    private static func record(_ kind: DelegateEvent.Kind, sessionIdentifier: String?, task: URLSessionTask? = nil,
                               error: Error? = nil, bytes: Int64? = nil) {
        let folder = AppEnvironment.layout.root.appendingPathComponent(folder, isDirectory: true)
        guard FileManager.default.fileExists(atPath: folder.path) else { return } // not under test
        let info = (error as NSError?)?.userInfo ?? [:]
        let process = (ProcessSpawner.currentExecutable as NSString).lastPathComponent
        let event = DelegateEvent(
            process: process, pid: getpid(), sequence: sequence.withLock { $0 += 1; return $0 }, time: Date(), kind: kind,
            session: sessionIdentifier, task: task?.taskIdentifier, taskDescription: task?.taskDescription,
            url: task?.originalRequest?.url?.absoluteString, statusCode: (task?.response as? HTTPURLResponse)?.statusCode,
            errorCode: (error as NSError?)?.code, cancelledReason: info[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int,
            hasResumeData: info[NSURLSessionDownloadTaskResumeData] != nil || info[NSURLSessionUploadTaskResumeData] != nil, bytes: bytes)
        guard var line = try? JSONEncoder().encode(event) else { return }
        line.append(0x0A)
        // One append of one line: lines of concurrent calls never interleave.
        let path = folder.appendingPathComponent("\(process)-\(getpid()).jsonl").path
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
