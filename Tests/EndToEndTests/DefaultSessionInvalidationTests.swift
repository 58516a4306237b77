import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// `finishTasksAndInvalidate` and `invalidateAndCancel` in a default session while its data
/// task still runs (S1.4): the task ends, then `didBecomeInvalidWithError(nil)` comes, last.
/// (A finished task looks at the session's invalidation only when one was asked for.)
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class DefaultSessionInvalidationTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Starts a data task for `body` served with `options`, calls `invalidate` once the body
    /// has begun to arrive, and waits for the session's invalidation; the task's identifier
    /// and the delegate's calls.
    private func invalidateWhileRunning(_ body: Data, options: RouteOptions, _ invalidate: (URLSession) -> Void) -> (task: Int, delegate: RecordingDelegate) {
        server.serve("/running", data: body, options: options)
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let task = session.dataTask(with: server.url(for: "/running"))
        task.resume()
        #expect(delegate.wait { if case .receivedData(task: task.taskIdentifier, _) = $0 { true } else { false } }, "the body began to arrive")
        invalidate(session)
        #expect(delegate.wait { $0 == .invalid(code: nil) }, "the session was invalidated once its task ended")
        #expect(delegate.calls.last == .invalid(code: nil), "invalidation comes last: \(delegate.calls)")
        return (task.taskIdentifier, delegate)
    }

    @Test("finishTasksAndInvalidate in a default session lets a running data task finish, then invalidates (S1.4)")
    func finishWhileDataTaskRuns() throws {
        let body = testPayload(size: 96 << 10, seed: 27)
        let (task, delegate) = invalidateWhileRunning(body, options: RouteOptions(bytesPerSecond: 64 << 10)) { $0.finishTasksAndInvalidate() } // about 1.5 s
        #expect(delegate.calls.contains(.completed(task: task, code: nil, status: 200)), "the task finished normally: \(delegate.calls)")
        #expect(delegate.receivedBodies[task] == body)
    }

    @Test("invalidateAndCancel in a default session ends a running data task with -999, then invalidates (S1.4)")
    func cancelWhileDataTaskRuns() throws {
        let (task, delegate) = invalidateWhileRunning(testPayload(size: 64 << 10, seed: 28), options: RouteOptions(stallAfterBytes: 1024)) { $0.invalidateAndCancel() }
        #expect(delegate.calls.contains(.completed(task: task, code: NSURLErrorCancelled, status: 200)), "the task was cancelled: \(delegate.calls)")
    }
}
}
