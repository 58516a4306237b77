import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests
import TransferPOSIX

/// `.becomeDownload` in a default session (S9.2): a data task whose delegate answers it to
/// `didReceive response` goes on as a download task, whose file comes to
/// `didFinishDownloadingTo`. Corelibs traps on that answer, so the differential test cannot
/// run it; this test holds the library to Apple's order of calls.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class BecomeDownloadTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Answers `.becomeDownload` and records the calls as words, in order (runs of
    /// `didWriteData` as one); checks the file during `didFinishDownloadingTo`.
    final class Becoming: URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
        let calls = Locked<[String]>([])
        let digest = Locked<String?>(nil)
        let location = Locked<URL?>(nil)
        let became = Locked<URLSessionDownloadTask?>(nil)
        let done = DispatchSemaphore(value: 0)

        private func note(_ call: String) {
            calls.withLock { if $0.last != call || call != "wrote" { $0.append(call) } }
        }
        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
            note("response(\((response as? HTTPURLResponse)?.statusCode ?? 0))")
            completionHandler(.becomeDownload)
        }
        /// What `getAllTasks`, asked in `didBecome`, listed: the download task alone?
        let listed = Locked<Bool?>(nil)

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask) {
            became.withLock { $0 = downloadTask }
            note("became(same identifier: \(downloadTask.taskIdentifier == dataTask.taskIdentifier))")
            session.getAllTasks { [listed] tasks in listed.withLock { $0 = tasks.count == 1 && tasks.first === downloadTask } }
        }
        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            note("data")
        }
        func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
            note("wrote")
        }
        func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
            digest.withLock { $0 = try? SHA256.hexDigest(ofFile: location.path) }
            self.location.withLock { $0 = location }
            note("downloaded")
        }
        func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
            note("metrics")
        }
        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            note("complete(\(task is URLSessionDownloadTask ? "download" : "data") \(error.map { "\(($0 as NSError).code)" } ?? "nil"))")
            done.signal()
        }
    }

    @Test("A data task answered .becomeDownload goes on as a download task: didBecome, didWriteData, the whole body in didFinishDownloadingTo (removed after), then didCompleteWithError(nil) for the download task, which getAllTasks lists")
    func becomesDownload() throws {
        let payload = testPayload(size: 3 << 20, seed: 83)
        // About a second and a half: the download is still running when the listing asked in
        // didBecome is made (a whole-suite run saw it finish first, and list nothing).
        server.serve("/become.bin", data: payload, options: RouteOptions(bytesPerSecond: 2 << 20))
        let delegate = Becoming()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: server.url(for: "/become.bin"))
        task.resume()
        #expect(delegate.done.wait(timeout: .now() + 30) == .success, "the task ended: \(delegate.calls.withLock { $0 })")
        #expect(delegate.calls.withLock { $0 } == ["response(200)", "became(same identifier: true)", "wrote", "downloaded", "complete(download nil)"])
        #expect(delegate.digest.withLock { $0 } == SHA256.hexDigest(of: payload), "the file holds the whole body")
        if let location = delegate.location.withLock({ $0 }) {
            #expect(!FileManager.default.fileExists(atPath: location.path), "the file exists only during the call")
        }
        #expect(delegate.listed.withLock { $0 } == true, "getAllTasks listed the download task in the data task's place")
        let download = try #require(delegate.became.withLock { $0 })
        #expect(download.state == .completed)
        #expect((download.response as? HTTPURLResponse)?.statusCode == 200)
        #expect(download.countOfBytesReceived == Int64(payload.count))
    }
}
}
