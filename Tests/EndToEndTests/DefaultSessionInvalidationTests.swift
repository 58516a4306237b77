import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// `finishTasksAndInvalidate` in a default session while its data task still runs (S1.4): the
/// task ends normally, then `didBecomeInvalidWithError(nil)` comes, last. (A finished task
/// looks at the session's invalidation only when one was asked for.)
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(5)))
final class DefaultSessionInvalidationTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    @Test("finishTasksAndInvalidate in a default session lets a running data task finish, then invalidates (S1.4)")
    func finishWhileDataTaskRuns() throws {
        let body = testPayload(size: 96 << 10, seed: 27)
        server.serve("/slow", data: body, options: RouteOptions(bytesPerSecond: 64 << 10)) // about 1.5 s
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let task = session.dataTask(with: server.url(for: "/slow"))
        task.resume()
        #expect(delegate.wait { if case .receivedData(task: task.taskIdentifier, _) = $0 { true } else { false } }, "the body began to arrive")
        session.finishTasksAndInvalidate()
        #expect(delegate.wait { $0 == .invalid(code: nil) }, "the session was invalidated once its task ended")
        let calls = delegate.calls
        #expect(calls.contains(.completed(task: task.taskIdentifier, code: nil, status: 200)), "the task finished normally: \(calls)")
        #expect(calls.last == .invalid(code: nil), "invalidation comes last: \(calls)")
        #expect(delegate.receivedBodies[task.taskIdentifier] == body)
    }

    @Test("invalidateAndCancel in a default session ends a running data task with -999, then invalidates (S1.4)")
    func cancelWhileDataTaskRuns() throws {
        server.serve("/stalled", data: testPayload(size: 64 << 10, seed: 28), options: RouteOptions(stallAfterBytes: 1024))
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let task = session.dataTask(with: server.url(for: "/stalled"))
        task.resume()
        #expect(delegate.wait { if case .receivedData(task: task.taskIdentifier, _) = $0 { true } else { false } }, "the first bytes arrived")
        session.invalidateAndCancel()
        #expect(delegate.wait { $0 == .invalid(code: nil) }, "the session was invalidated once its task ended")
        let calls = delegate.calls
        #expect(calls.contains(.completed(task: task.taskIdentifier, code: NSURLErrorCancelled, status: 200)), "the task was cancelled: \(calls)")
        #expect(calls.last == .invalid(code: nil), "invalidation comes last: \(calls)")
    }
}
}
