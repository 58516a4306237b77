import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferPOSIX

/// `URLSessionTask.progress` of a default session's data task: Apple's counts the body bytes
/// received, whenever it is read; of an upload task, the body bytes sent. The task makes its `Progress` when first asked (issue 27),
/// so both orders are held here: read only after the end, and read first, then after the end.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class TaskProgressTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Runs a GET of `size` bytes with a completion handler; `beforeResume` sees the task first.
    private func get(size: Int, beforeResume: (URLSessionDataTask) -> Void) throws -> URLSessionDataTask {
        server.serve("/progress.bin", data: Data(repeating: 5, count: size))
        let session = URLSession(configuration: .default)
        defer { session.invalidateAndCancel() }
        let ended = DispatchSemaphore(value: 0)
        let received = Locked<Int?>(nil)
        let task = session.dataTask(with: server.url(for: "/progress.bin")) { data, _, _ in
            received.withLock { $0 = data?.count }
            ended.signal()
        }
        beforeResume(task)
        task.resume()
        try #require(ended.wait(timeout: .now() + 30) == .success, "the GET ended")
        #expect(received.withLock { $0 } == size)
        return task
    }

    @Test("A data task's progress first read after the end counts the body bytes received")
    func readAfterTheEnd() throws {
        let task = try get(size: 1024) { _ in }
        #expect(task.progress.completedUnitCount == 1024)
        #expect(task.progress.completedUnitCount == task.countOfBytesReceived)
    }

    @Test("A data task's progress read before resume() is kept in step: after the end it counts the body bytes received")
    func readBeforeResume() throws {
        let first = Locked<Int64?>(nil)
        let task = try get(size: 4096) { task in first.withLock { $0 = task.progress.completedUnitCount } }
        #expect(first.withLock { $0 } == 0)
        #expect(task.progress.completedUnitCount == 4096)
    }

    @Test("An upload task's progress read before resume() counts the body bytes sent: in each didSendBodyData as much as the call says, and all of them at the end, out of the body's length (-1 for a stream)",
          arguments: ["data", "file", "stream"])
    func uploadProgress(_ source: String) throws {
        server.acceptUploads(at: "/progress-upload")
        let body = Data(repeating: 7, count: 600_000)
        let delegate = SendingDelegate(stream: body)
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/progress-upload"))
        request.httpMethod = source == "stream" ? "POST" : "PUT"
        let task: URLSessionUploadTask
        switch source {
        case "data": task = session.uploadTask(with: request, from: body)
        case "file":
            let file = URL(fileURLWithPath: container.root).appendingPathComponent("progress-upload.bin")
            try body.write(to: file)
            task = session.uploadTask(with: request, fromFile: file)
        default: task = session.uploadTask(withStreamedRequest: request)
        }
        #expect(task.progress.completedUnitCount == 0)
        task.resume()
        try #require(delegate.ended.wait(timeout: .now() + 30) == .success, "the upload ended")
        #expect(server.receivedUploads(at: "/progress-upload").first?.byteCount == Int64(body.count))
        let total: Int64 = source == "stream" ? -1 : Int64(body.count)
        let calls = delegate.calls.withLock { $0 }
        #expect(!calls.isEmpty, "didSendBodyData was called")
        #expect(calls.allSatisfy { $0.progress >= $0.sent && $0.total == total }, "\(calls)")
        #expect(task.countOfBytesSent == Int64(body.count))
        #expect(task.progress.completedUnitCount == Int64(body.count))
        #expect(task.progress.totalUnitCount == total)
    }
}
}

/// Records, in each `didSendBodyData`, what the call says and what the task's progress says
/// then. Called on the session's delegate queue; its record is behind a lock.
private final class SendingDelegate: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    let calls = Locked<[(sent: Int64, progress: Int64, total: Int64)]>([])
    let ended = DispatchSemaphore(value: 0)
    /// The body of a streamed upload, handed out in `needNewBodyStream`.
    let stream: Data

    init(stream: Data) {
        self.stream = stream
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
        completionHandler(InputStream(data: stream))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        let progress = task.progress
        calls.withLock { $0.append((totalBytesSent, progress.completedUnitCount, progress.totalUnitCount)) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        ended.signal()
    }
}
