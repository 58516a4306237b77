import Foundation
import FoundationNetworking

/// Session-level events (Apple's `URLSessionDelegate`). Called on the session's delegate queue.
public protocol URLSessionDelegate: AnyObject, Sendable {
    /// The session is invalid: after `finishTasksAndInvalidate`/`invalidateAndCancel` (error
    /// nil), or because it could not be opened (-995, -996, a refused identifier).
    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?)
    /// Every event waiting for a session the app was launched for has been delivered (S3.2).
    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession)
    /// A challenge for the session; for Basic and Digest, called when the task delegate's
    /// `urlSession(_:task:didReceive:completionHandler:)` is the default one. The default
    /// performs default handling (a stored credential, else the 401/407 is delivered).
    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
}

/// Task-level events (Apple's `URLSessionTaskDelegate`).
public protocol URLSessionTaskDelegate: URLSessionDelegate {
    /// The task ended. An HTTP error status is not an error here (S2.5).
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?)
    /// A resumed task waits for a network it may use (offline, or only cellular, expensive or
    /// constrained networks it may not use); called once per task (S5.2). It then starts by
    /// itself when such a network appears (S5.3).
    func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask)
    /// A task with an `earliestBeginDate` is about to start (S5.1): go on, go on with another
    /// request (`.useNewRequest`), or cancel. The default goes on.
    func urlSession(_ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest, completionHandler: @escaping @Sendable (URLSession.DelayedRequestDisposition, URLRequest?) -> Void)
    /// The server (401) or the session's proxy (407) asks for credentials, Basic or Digest
    /// (S3.1): the task waits for the answer, even across a relaunch of the app. The default
    /// hands the challenge to the session delegate's `urlSession(_:didReceive:completionHandler:)`.
    /// `previousFailureCount` counts the credentials the server refused for this task.
    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
    /// Ours, not Apple's: the daemon is about to retry or resume the task (after network
    /// trouble, a restart, a refused credential): answer header fields to set on its request
    /// from now on (a fresh `Authorization` token), or nil to keep them. Asked only while a
    /// process holds the session; the daemon waits up to 10 s for the answer.
    func urlSession(_ session: URLSession, task: URLSessionTask, willRetry request: URLRequest, completionHandler: @escaping @Sendable ([String: String]?) -> Void)
    /// Upload progress (S7.3): bytes sent since the last call, in all, and the body's length
    /// (-1 when unknown). Not called while no process holds a background session.
    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64)
    /// A task was made (`downloadTask(with:)`, `uploadTask(with:fromFile:)`, …): the first call
    /// about it, on the delegate queue. Not made for tasks the session refused.
    func urlSession(_ session: URLSession, didCreateTask task: URLSessionTask)
    /// What was measured of the task: its interval and its last exchange, with the protocol
    /// negotiated ("h2"). Called once per finished task, just before `didCompleteWithError`.
    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics)
    /// A default session's data or upload task got a redirect: answer the request to follow,
    /// or nil to stop there (the redirect's response becomes the task's). The default follows.
    /// Not asked in background sessions, which follow redirects silently (S2.3).
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void)
    /// A default session's task whose body is a stream must send it again (after a redirect
    /// or an authentication challenge): answer a fresh stream of the same bytes. The default
    /// answers nil, which fails the task.
    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void)
}

/// Download-task events (Apple's `URLSessionDownloadDelegate`).
public protocol URLSessionDownloadDelegate: URLSessionTaskDelegate {
    /// The download finished. The file at `location` exists only until this method returns:
    /// move it or open it now (S3.3).
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL)
    /// Download progress (S7.3): bytes written since the last call, in all, and the body's
    /// length (-1 without `Content-Length`). Not called while no process holds a background session.
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
    /// A download made from resume data started (S6.1): at `fileOffset` when the server sent
    /// the rest, at 0 when it sent the whole resource again.
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64)
}

/// Data-task events (Apple's `URLSessionDataDelegate`): for upload tasks, the server's answer.
public protocol URLSessionDataDelegate: URLSessionTaskDelegate {
    /// The body of the server's answer to an upload, before `didCompleteWithError` (S2.1).
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data)
    /// A default session's data or upload task got its response, before any of its body:
    /// `.allow` goes on, `.cancel` ends the task with -999, `.becomeDownload` hands the body to
    /// a download task (`didBecome downloadTask`). `.becomeStream` is not offered: the task
    /// ends with -1 saying so. The default allows.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void)
    /// The data task's delegate answered `.becomeDownload`: from now on `downloadTask` stands
    /// for it, with `didWriteData`, `didFinishDownloadingTo` and `didCompleteWithError`; the
    /// data task gets no more calls.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask)
    /// A default session's response may be stored in the configuration's `urlCache`: answer
    /// it (or another, or nil to store nothing). The default stores the proposed one.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, willCacheResponse proposedResponse: CachedURLResponse, completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void)
}

extension URLSessionDelegate {
    public func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {}
    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {}
    public func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        completionHandler(.performDefaultHandling, nil)
    }
}

extension URLSessionTaskDelegate {
    // Each default goes to the session's delegate when `self` is a task's own delegate that
    // leaves the method out (TaskDelegateFallback.swift), as Apple's sessions do.
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        sessionFallback(session, task, as: URLSessionTaskDelegate.self)?.urlSession(session, task: task, didCompleteWithError: error)
    }
    public func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        sessionFallback(session, task, as: URLSessionTaskDelegate.self)?.urlSession(session, task: task, didFinishCollecting: metrics)
    }
    public func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask) {
        sessionFallback(session, task, as: URLSessionTaskDelegate.self)?.urlSession(session, taskIsWaitingForConnectivity: task)
    }
    public func urlSession(_ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest, completionHandler: @escaping @Sendable (URLSession.DelayedRequestDisposition, URLRequest?) -> Void) {
        guard let other = sessionFallback(session, task, as: URLSessionTaskDelegate.self) else { return completionHandler(.continueLoading, nil) }
        other.urlSession(session, task: task, willBeginDelayedRequest: request, completionHandler: completionHandler)
    }
    public func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        guard let other = sessionFallback(session, task, as: URLSessionTaskDelegate.self) else { return urlSession(session, didReceive: challenge, completionHandler: completionHandler) }
        other.urlSession(session, task: task, didReceive: challenge, completionHandler: completionHandler)
    }
    public func urlSession(_ session: URLSession, task: URLSessionTask, willRetry request: URLRequest, completionHandler: @escaping @Sendable ([String: String]?) -> Void) {
        guard let other = sessionFallback(session, task, as: URLSessionTaskDelegate.self) else { return completionHandler(nil) }
        other.urlSession(session, task: task, willRetry: request, completionHandler: completionHandler)
    }
    public func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        sessionFallback(session, task, as: URLSessionTaskDelegate.self)?.urlSession(session, task: task, didSendBodyData: bytesSent, totalBytesSent: totalBytesSent, totalBytesExpectedToSend: totalBytesExpectedToSend)
    }
    public func urlSession(_ session: URLSession, didCreateTask task: URLSessionTask) {}
    public func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        guard let other = sessionFallback(session, task, as: URLSessionTaskDelegate.self) else { return completionHandler(request) }
        other.urlSession(session, task: task, willPerformHTTPRedirection: response, newRequest: request, completionHandler: completionHandler)
    }
    public func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
        guard let other = sessionFallback(session, task, as: URLSessionTaskDelegate.self) else { return completionHandler(nil) }
        other.urlSession(session, task: task, needNewBodyStream: completionHandler)
    }
}

extension URLSessionDownloadDelegate {
    public func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        sessionFallback(session, downloadTask, as: URLSessionDownloadDelegate.self)?.urlSession(session, downloadTask: downloadTask, didWriteData: bytesWritten, totalBytesWritten: totalBytesWritten, totalBytesExpectedToWrite: totalBytesExpectedToWrite)
    }
    public func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {
        sessionFallback(session, downloadTask, as: URLSessionDownloadDelegate.self)?.urlSession(session, downloadTask: downloadTask, didResumeAtOffset: fileOffset, expectedTotalBytes: expectedTotalBytes)
    }
}

extension URLSessionDataDelegate {
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        sessionFallback(session, dataTask, as: URLSessionDataDelegate.self)?.urlSession(session, dataTask: dataTask, didReceive: data)
    }
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        guard let other = sessionFallback(session, dataTask, as: URLSessionDataDelegate.self) else { return completionHandler(.allow) }
        other.urlSession(session, dataTask: dataTask, didReceive: response, completionHandler: completionHandler)
    }
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask) {
        sessionFallback(session, dataTask, as: URLSessionDataDelegate.self)?.urlSession(session, dataTask: dataTask, didBecome: downloadTask)
    }
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, willCacheResponse proposedResponse: CachedURLResponse, completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void) {
        guard let other = sessionFallback(session, dataTask, as: URLSessionDataDelegate.self) else { return completionHandler(proposedResponse) }
        other.urlSession(session, dataTask: dataTask, willCacheResponse: proposedResponse, completionHandler: completionHandler)
    }
}
