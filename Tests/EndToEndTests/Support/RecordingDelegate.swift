import Foundation
import BackgroundTransfer
import LoopbackServer
import Digests

/// A delegate that records every call in order, and lets a test wait for one.
/// Called on the session's delegate queue; its record is behind a condition lock.
final class RecordingDelegate: URLSessionDownloadDelegate, URLSessionDataDelegate, @unchecked Sendable {
    enum Call: Equatable {
        case wroteData(task: Int, total: Int64, expected: Int64)
        case sentBody(task: Int, total: Int64, expected: Int64)
        case receivedData(task: Int, count: Int)
        case finishedDownloading(task: Int, existedDuringCall: Bool, size: Int64)
        case completed(task: Int, code: Int?, status: Int?)
        case resumed(task: Int, offset: Int64, expected: Int64)
        case finishedEvents
        case invalid(code: Int?)
        case waitingForConnectivity(task: Int)
        case willBeginDelayedRequest(task: Int, url: String)
        case challenge(task: Int, method: String, realm: String?, previousFailures: Int, proxy: Bool)
        case willRetry(task: Int)
    }

    /// How challenges are answered (default: default handling).
    var challengeAnswer: @Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?) = { _ in (.performDefaultHandling, nil) }
    /// The headers given before a retry (default: none).
    var retryHeaders: @Sendable (URLRequest) -> [String: String]? = { _ in nil }

    /// Run at the end of didFinishDownloadingTo with the file's location (default: nothing;
    /// the file is left where it is).
    var afterFinishing: @Sendable (URL) -> Void = { _ in }

    /// How `willBeginDelayedRequest` is answered (default: go on).
    var delayedRequestAnswer: @Sendable (URLRequest) -> (URLSession.DelayedRequestDisposition, URLRequest?) = { _ in (.continueLoading, nil) }

    private let condition = NSCondition()
    private var recorded: [Call] = []
    /// Locations handed to didFinishDownloadingTo, to check they are gone afterwards.
    private(set) var locations: [URL] = []
    /// The SHA-256 of each finished download, by task.
    private(set) var digests: [Int: String] = [:]
    /// The errors given to didCompleteWithError, by task.
    private(set) var errors: [Int: Error] = [:]
    /// What didReceive data handed over, by task.
    private(set) var receivedBodies: [Int: Data] = [:]
    /// Every challenge asked, in order: checked by the test in its own task (an `#expect` in
    /// `challengeAnswer` would run on the delegate queue, outside any test).
    private(set) var challenges: [URLAuthenticationChallenge] = []
    /// What didFinishCollecting handed over, by task.
    private var metricsLog: [Int: URLSessionTaskMetrics] = [:]
    /// Every didWriteData's bytesWritten and totalBytesWritten, by task, in order.
    private var writeLog: [Int: [(bytesWritten: Int64, total: Int64)]] = [:]

    func writes(of task: Int) -> [(bytesWritten: Int64, total: Int64)] {
        condition.lock()
        defer { condition.unlock() }
        return writeLog[task] ?? []
    }

    func metrics(of task: Int) -> URLSessionTaskMetrics? {
        condition.lock()
        defer { condition.unlock() }
        return metricsLog[task]
    }

    var calls: [Call] {
        condition.lock()
        defer { condition.unlock() }
        return recorded
    }

    private func record(_ call: Call) {
        condition.lock()
        recorded.append(call)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until a call matches; false at the deadline.
    func wait(timeout: TimeInterval = 20, for matches: (Call) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !recorded.contains(where: matches) {
            if !condition.wait(until: deadline) { return recorded.contains(where: matches) }
        }
        return true
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        condition.lock()
        writeLog[downloadTask.taskIdentifier, default: []].append((bytesWritten, totalBytesWritten))
        condition.unlock()
        record(.wroteData(task: downloadTask.taskIdentifier, total: totalBytesWritten, expected: totalBytesExpectedToWrite))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        record(.sentBody(task: task.taskIdentifier, total: totalBytesSent, expected: totalBytesExpectedToSend))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        condition.lock()
        receivedBodies[dataTask.taskIdentifier, default: Data()].append(data)
        condition.unlock()
        record(.receivedData(task: dataTask.taskIdentifier, count: data.count))
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let size = ((try? FileManager.default.attributesOfItem(atPath: location.path)[.size]) as? NSNumber)?.int64Value ?? -1
        let digest = (try? SHA256.hexDigest(ofFile: location.path)) ?? "unreadable"
        condition.lock()
        locations.append(location)
        digests[downloadTask.taskIdentifier] = digest
        condition.unlock()
        record(.finishedDownloading(task: downloadTask.taskIdentifier, existedDuringCall: FileManager.default.fileExists(atPath: location.path), size: size))
        afterFinishing(location)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {
        record(.resumed(task: downloadTask.taskIdentifier, offset: fileOffset, expected: expectedTotalBytes))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        condition.lock()
        metricsLog[task.taskIdentifier] = metrics
        condition.unlock()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error {
            condition.lock()
            errors[task.taskIdentifier] = error
            condition.unlock()
        }
        record(.completed(task: task.taskIdentifier, code: error.map { ($0 as NSError).code }, status: (task.response as? HTTPURLResponse)?.statusCode))
    }

    func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask) {
        record(.waitingForConnectivity(task: task.taskIdentifier))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest, completionHandler: @escaping @Sendable (URLSession.DelayedRequestDisposition, URLRequest?) -> Void) {
        record(.willBeginDelayedRequest(task: task.taskIdentifier, url: request.url?.absoluteString ?? ""))
        let (disposition, newRequest) = delayedRequestAnswer(request)
        completionHandler(disposition, newRequest)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let space = challenge.protectionSpace
        condition.lock()
        challenges.append(challenge)
        condition.unlock()
        record(.challenge(task: task.taskIdentifier, method: space.authenticationMethod, realm: space.realm, previousFailures: challenge.previousFailureCount, proxy: space.isProxy()))
        let (disposition, credential) = challengeAnswer(challenge)
        completionHandler(disposition, credential)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willRetry request: URLRequest, completionHandler: @escaping @Sendable ([String: String]?) -> Void) {
        record(.willRetry(task: task.taskIdentifier))
        completionHandler(retryHeaders(request))
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        record(.finishedEvents)
    }

    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        record(.invalid(code: error.map { ($0 as NSError).code }))
    }
}

/// Matches the task's successful completion with `status` (for `RecordingDelegate.wait`).
func completed(_ task: URLSessionTask, status: Int) -> (RecordingDelegate.Call) -> Bool {
    { $0 == .completed(task: task.taskIdentifier, code: nil, status: status) }
}
