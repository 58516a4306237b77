import BackgroundTransfer
import TransferPOSIX

/// The session delegate of the stand-in app and extensions: moves finished downloads into
/// the app group's `Downloads/`, logs every delegate call (and the server's answer to an upload),
/// hands the main ones to `DelegateEventRecorder` (tests read them back, typed), shows the progress of a task waited for (`--wait`, on a terminal), and tells its
/// owner when tasks end and when events are finished.
/// Called on the session's serial delegate queue; its own state is behind a lock.
public final class StandInDelegate: URLSessionDownloadDelegate, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var completed: [Int: Error?] = [:]
    private let completedCondition = NSCondition()
    /// Called after `urlSessionDidFinishEvents` (the app then calls its completion handler);
    /// set again when the app is woken with a new one.
    public var onFinishEvents: (@Sendable () -> Void)? {
        get { finishEvents.withLock { $0 } }
        set { finishEvents.withLock { $0 = newValue } }
    }
    private let finishEvents = Locked<(@Sendable () -> Void)?>(nil)
    public let echo: Bool
    /// The bar of the task waited for (`--wait`), and that task: other tasks of the session
    /// report progress too, and must not move its bar or its rate.
    private let progressBar = Locked<(bar: WaitProgressBar, task: Int)?>(nil)

    /// What `didReceive data` handed over, by task: a data task's body, an upload's answer.
    private let bodies = Locked<[Int: Data]>([:])

    /// Everything `didReceive data` handed over for the task so far.
    public func body(of taskIdentifier: Int) -> Data { bodies.withLock { $0[taskIdentifier] ?? Data() } }

    public init(echo: Bool) {
        self.echo = echo
    }

    /// Shows the progress of task `taskIdentifier` from now on on `bar` (nil: none).
    public func showProgress(on bar: WaitProgressBar?, of taskIdentifier: Int) {
        progressBar.withLock { $0 = bar.map { ($0, taskIdentifier) } }
    }

    /// The bar, if `task` is the one it shows.
    private func bar(for task: URLSessionTask) -> WaitProgressBar? {
        progressBar.withLock { shown in shown.flatMap { $0.task == task.taskIdentifier ? $0.bar : nil } }
    }

    private func say(_ text: String, session: URLSession, task: Int? = nil) {
        AppEnvironment.log.notice("delegate", text, session: session.configuration.identifier, task: task)
        progressBar.withLock { $0?.bar }?.clear()
        if echo { print(text) }
    }

    public func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        bar(for: downloadTask)?.update(downloadTask, done: totalBytesWritten, expected: totalBytesExpectedToWrite)
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        bar(for: task)?.update(task, done: totalBytesSent, expected: totalBytesExpectedToSend)
    }

    public func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        DelegateEventRecorder.urlSession(session, downloadTask: downloadTask, didFinishDownloadingTo: location)
        let http = downloadTask.response as? HTTPURLResponse
        // An app checks the status: an error page must not replace a good file in Downloads/
        // (the library hands it over, as Apple's does, S2.5).
        if let status = http?.statusCode, !(200..<300).contains(status) {
            say("didFinishDownloadingTo: task \(downloadTask.taskIdentifier) answered HTTP \(status): the server's answer is not saved", session: session, task: downloadTask.taskIdentifier)
            return
        }
        // Foundation answers "Unknown" when the server suggests nothing: only a Content-Disposition counts.
        let suggested = http?.value(forHTTPHeaderField: "Content-Disposition") != nil ? http?.suggestedFilename : nil
        let name = DownloadsFolder.fileName(suggested: suggested, url: downloadTask.originalRequest?.url)
        do {
            let destination = try DownloadsFolder.adopt(location, name: name)
            say("didFinishDownloadingTo: task \(downloadTask.taskIdentifier) moved to Downloads/\(destination.lastPathComponent)", session: session, task: downloadTask.taskIdentifier)
        } catch {
            say("didFinishDownloadingTo: task \(downloadTask.taskIdentifier) could not be moved: \(error)", session: session, task: downloadTask.taskIdentifier)
        }
    }

    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        bodies.withLock { $0[dataTask.taskIdentifier, default: Data()].append(data) }
        let text = String(decoding: data.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        say("didReceive: task \(dataTask.taskIdentifier), \(data.count) bytes: \(text)", session: session, task: dataTask.taskIdentifier)
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        DelegateEventRecorder.urlSession(session, task: task, didCompleteWithError: error)
        let status = (task.response as? HTTPURLResponse)?.statusCode
        if let error {
            let info = (error as NSError).userInfo
            let reason = (info[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int).map { ", cancelled reason \($0)" } ?? ""
            let resumable = info[NSURLSessionDownloadTaskResumeData] != nil || info[NSURLSessionUploadTaskResumeData] != nil ? ", with resume data" : ""
            say("didCompleteWithError: task \(task.taskIdentifier) failed: \(error.localizedDescription) (\((error as NSError).code)\(reason)\(resumable))", session: session, task: task.taskIdentifier)
        } else {
            say("didCompleteWithError(nil): task \(task.taskIdentifier), HTTP \(status.map(String.init) ?? "-")", session: session, task: task.taskIdentifier)
        }
        completedCondition.lock()
        completed[task.taskIdentifier] = error
        completedCondition.broadcast()
        completedCondition.unlock()
    }

    /// Answers Basic and Digest challenges from the host's keychain (`host-app remember-password`),
    /// for the session; a refused password is not tried again.
    public func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let space = challenge.protectionSpace
        let asked = "didReceive challenge: task \(task.taskIdentifier), \(space.authenticationMethod == NSURLAuthenticationMethodHTTPDigest ? "Digest" : "Basic") realm \"\(space.realm ?? "")\" at \(space.isProxy() ? "proxy " : "")\(space.host):\(space.port), previous failures \(challenge.previousFailureCount)"
        guard challenge.previousFailureCount == 0, let item = Keychain.item(realm: space.realm) else {
            say("\(asked): no password to try; default handling", session: session, task: task.taskIdentifier)
            completionHandler(.performDefaultHandling, nil)
            return
        }
        say("\(asked): answered with the keychain's password for \(item.user)", session: session, task: task.taskIdentifier)
        completionHandler(.useCredential, URLCredential(user: item.user, password: item.password, persistence: .forSession))
    }

    /// Server trust (S3.6): a chain the system does not trust is accepted when it verifies
    /// against the roots in the host's keychain (`host-app trust-certificate`), for that
    /// server's key; otherwise the default evaluation stands (the task fails with its code).
    public func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust, let trust = challenge.protectionSpace.serverTrust else {
            completionHandler(.performDefaultHandling, nil)
            return
        }
        let server = "\(challenge.protectionSpace.host):\(challenge.protectionSpace.port)"
        let anchors = Keychain.anchors().compactMap { SecCertificateCreateWithData(nil, $0) }
        guard !anchors.isEmpty else {
            say("didReceive server trust challenge for \(server): no trusted certificate in the keychain; default handling", session: session)
            completionHandler(.performDefaultHandling, nil)
            return
        }
        SecTrustSetAnchorCertificates(trust, anchors)
        var error: Error?
        guard SecTrustEvaluateWithError(trust, &error) else {
            say("didReceive server trust challenge for \(server): not trusted by the keychain either (\(error?.localizedDescription ?? "?")); default handling", session: session)
            completionHandler(.performDefaultHandling, nil)
            return
        }
        say("didReceive server trust challenge for \(server): the chain ends in a certificate the keychain trusts; accepted", session: session)
        completionHandler(.useCredential, URLCredential(trust: trust))
    }

    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        DelegateEventRecorder.urlSessionDidFinishEvents(forBackgroundURLSession: session)
        say("urlSessionDidFinishEvents(forBackgroundURLSession: \(session.configuration.identifier ?? "?"))", session: session)
        onFinishEvents?()
    }

    public func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        DelegateEventRecorder.urlSession(session, didBecomeInvalidWithError: error)
        say("didBecomeInvalidWithError: \(error.map { "\($0.localizedDescription) (\(($0 as NSError).code))" } ?? "nil")", session: session)
        completedCondition.lock()
        invalidated = true
        completedCondition.broadcast()
        completedCondition.unlock()
    }

    private var invalidated = false

    /// Waits until the session has become invalid; false on timeout.
    public func waitForInvalidation(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        completedCondition.lock()
        defer { completedCondition.unlock() }
        while !invalidated {
            if !completedCondition.wait(until: deadline) { break }
        }
        return invalidated
    }

    /// Waits for `task` (a stand-in's `--wait`) and says how it ended, as the stand-in's exit
    /// status: 0 when it succeeded with a 2xx answer; 1, with a line on stderr naming the
    /// status or the wait, when the server answered otherwise or the task did not finish
    /// (a failure is already on stdout).
    /// While it waits, it says on stderr why the task does not run, as the reason changes.
    public func exitStatus(waitingFor task: URLSessionTask, in session: URLSession, timeout: TimeInterval) -> Int32 {
        var reporter = WaitReporter(session: session.configuration.identifier ?? "", task: task.taskIdentifier)
        let deadline = Date().addingTimeInterval(timeout)
        var outcome = waitForCompletion(of: task.taskIdentifier, timeout: min(1, timeout))
        while !outcome.finished && Date() < deadline {
            if let line = reporter.report() {
                progressBar.withLock { $0?.bar }?.clear()
                StandInProgram.complain(line)
            }
            outcome = waitForCompletion(of: task.taskIdentifier, timeout: min(1, max(0, deadline.timeIntervalSinceNow)))
        }
        guard outcome.finished else {
            StandInProgram.complain("task \(task.taskIdentifier) did not finish within \(Int(timeout)) s")
            return 1
        }
        guard outcome.error == nil else { return 1 }
        if let status = (task.response as? HTTPURLResponse)?.statusCode, !(200..<300).contains(status) {
            StandInProgram.complain("task \(task.taskIdentifier) ended with HTTP \(status): the server's answer was not saved")
            return 1
        }
        return 0
    }

    /// Waits until the task has completed; returns its error (nil for success) or times out.
    public func waitForCompletion(of taskIdentifier: Int, timeout: TimeInterval) -> (finished: Bool, error: Error?) {
        let deadline = Date().addingTimeInterval(timeout)
        completedCondition.lock()
        defer { completedCondition.unlock() }
        while completed[taskIdentifier] == nil {
            if !completedCondition.wait(until: deadline) { break }
        }
        guard let outcome = completed[taskIdentifier] else { return (false, nil) }
        return (true, outcome)
    }
}
