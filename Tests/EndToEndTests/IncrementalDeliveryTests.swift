import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

extension InProcess {
/// `prefersIncrementalDelivery` (Apple's, iOS 14.5; corelibs has none, so the differential
/// test cannot hold it): a task that prefers no incremental delivery gets its whole body in
/// one `didReceive data`, just before `didCompleteWithError`; the default is true but for
/// download tasks and completion-handler tasks. Against the loopback server, whose bodies
/// arrive in many pieces.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class IncrementalDeliveryTests: InProcessSuite, @unchecked Sendable {

    /// The data calls and the end of `task`, in order.
    private func dataAndEnd(of task: URLSessionTask, in delegate: RecordingDelegate) -> [RecordingDelegate.Call] {
        delegate.calls.filter { call in
            switch call {
            case .receivedData(task.taskIdentifier, _), .completed(task.taskIdentifier, _, _): true
            default: false
            }
        }
    }

    /// Waits up to 30 s for `task`'s `didCompleteWithError`.
    private func waitForEnd(of task: URLSessionTask, in delegate: RecordingDelegate) -> Bool {
        delegate.wait(timeout: 30) { if case .completed(task.taskIdentifier, _, _) = $0 { return true } else { return false } }
    }

    @Test("Apple's defaults: true for data and upload tasks, false for download tasks and for tasks made with a completion handler; the app's setting is kept")
    func defaults() throws {
        let session = URLSession(configuration: .default, delegate: RecordingDelegate(), delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let url = server.url(for: "/never-resumed")
        let data = session.dataTask(with: url)
        let upload = session.uploadTask(with: URLRequest(url: url), from: Data("x".utf8))
        let download = session.downloadTask(with: url)
        let handled = session.dataTask(with: url) { _, _, _ in }
        #expect(data.prefersIncrementalDelivery)
        #expect(upload.prefersIncrementalDelivery)
        #expect(!download.prefersIncrementalDelivery)
        #expect(!handled.prefersIncrementalDelivery)
        data.prefersIncrementalDelivery = false
        download.prefersIncrementalDelivery = true
        #expect(!data.prefersIncrementalDelivery)
        #expect(download.prefersIncrementalDelivery)
        #expect(server.requests.isEmpty, "no task was resumed")
    }

    @Test("A default session's data task with prefersIncrementalDelivery false gets its 4 MiB body in one didReceive data, then didCompleteWithError(nil); the same task left at true gets it in many pieces")
    func wholeBodyInOneCall() throws {
        let payload = testPayload(size: 4 << 20, seed: 91)
        server.serve("/whole.bin", data: payload)
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }

        let whole = session.dataTask(with: server.url(for: "/whole.bin"))
        whole.prefersIncrementalDelivery = false
        whole.resume()
        #expect(waitForEnd(of: whole, in: delegate), "\(delegate.calls)")
        #expect(dataAndEnd(of: whole, in: delegate) == [.receivedData(task: whole.taskIdentifier, count: payload.count), .completed(task: whole.taskIdentifier, code: nil, status: 200)])
        #expect(delegate.receivedBodies[whole.taskIdentifier] == payload)

        let pieces = session.dataTask(with: server.url(for: "/whole.bin"))
        pieces.resume()
        #expect(waitForEnd(of: pieces, in: delegate), "\(delegate.calls)")
        let calls = dataAndEnd(of: pieces, in: delegate)
        #expect(calls.count > 2, "the default delivers the body as it arrives: \(calls.count - 1) pieces")
        #expect(calls.last == .completed(task: pieces.taskIdentifier, code: nil, status: 200))
        #expect(delegate.receivedBodies[pieces.taskIdentifier] == payload)
    }

    @Test("An upload task with prefersIncrementalDelivery false still sends its 700,000 bytes with didSendBodyData, and gets the server's answer in one call before didCompleteWithError")
    func uploadAnswerInOneCall() throws {
        server.acceptUploads(at: "/answer")
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/answer"))
        request.httpMethod = "POST"
        let upload = session.uploadTask(with: request, from: testPayload(size: 700_000, seed: 93))
        upload.prefersIncrementalDelivery = false
        upload.resume()
        #expect(waitForEnd(of: upload, in: delegate), "\(delegate.calls)")
        #expect(delegate.calls.contains(.sentBody(task: upload.taskIdentifier, total: 700_000, expected: 700_000)), "\(delegate.calls)")
        let answer = try #require(delegate.receivedBodies[upload.taskIdentifier])
        #expect(dataAndEnd(of: upload, in: delegate) == [.receivedData(task: upload.taskIdentifier, count: answer.count), .completed(task: upload.taskIdentifier, code: nil, status: 200)])
        #expect(String(decoding: answer, as: UTF8.self).contains("\"bytes\":700000"), "the server's whole answer: \(String(decoding: answer, as: UTF8.self))")
    }

    @Test("A body cut off by the server after 600,000 of 2,000,000 bytes: the bytes that came arrive in one call, then -1005")
    func cutBodyInOneCall() throws {
        var cut = RouteOptions()
        cut.dropAfterBytes = 600_000
        server.serve("/cut.bin", data: testPayload(size: 2_000_000, seed: 94), options: cut)
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: server.url(for: "/cut.bin"))
        task.prefersIncrementalDelivery = false
        task.resume()
        #expect(waitForEnd(of: task, in: delegate), "\(delegate.calls)")
        let calls = dataAndEnd(of: task, in: delegate)
        #expect(calls.count == 2, "one data call and the end: \(calls)")
        if case .receivedData(_, let count)? = calls.first { #expect(count > 0 && count <= 600_000, "\(count) bytes") }
        if case .completed(_, let code, _)? = calls.last { #expect(code == URLError.networkConnectionLost.rawValue, "ended with \(String(describing: code))") }
    }

    @Test("A background session's data task (S2.2) with prefersIncrementalDelivery false gets its body in one call, then didCompleteWithError(nil)")
    func backgroundDataTaskInOneCall() throws {
        let payload = testPayload(size: 1 << 20, seed: 95)
        server.serve("/bg-whole.bin", data: payload)
        let delegate = RecordingDelegate()
        let session = fixture.session("whole-bodies", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: server.url(for: "/bg-whole.bin"))
        #expect(task.prefersIncrementalDelivery)
        task.prefersIncrementalDelivery = false
        task.resume()
        #expect(waitForEnd(of: task, in: delegate), "\(delegate.calls)")
        #expect(dataAndEnd(of: task, in: delegate) == [.receivedData(task: task.taskIdentifier, count: payload.count), .completed(task: task.taskIdentifier, code: nil, status: 200)])
        #expect(delegate.receivedBodies[task.taskIdentifier] == payload)
    }
}
}
