import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

/// A completed task is not among `getAllTasks`' tasks, even asked from within its own
/// `didCompleteWithError` (the task is completed there; the session forgets it only after the
/// call returns). A full run once listed a background session's finished data task to a
/// test woken by that call.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class CompletedTaskListingTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Asks `getAllTasks` inside `didCompleteWithError` (a default session answers at once)
    /// and keeps whether the ending task was listed.
    final class ListingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        let done = NSCondition()
        var listedWhileCompleting: Bool?

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            session.getAllTasks { tasks in
                self.done.withLock {
                    self.listedWhileCompleting = tasks.contains { $0 === task }
                    self.done.broadcast()
                }
            }
        }

        func wait(timeout: TimeInterval = 20) -> Bool? {
            let deadline = Date().addingTimeInterval(timeout)
            return done.withLock {
                while listedWhileCompleting == nil && done.wait(until: deadline) {}
                return listedWhileCompleting
            }
        }
    }

    @Test("getAllTasks asked in didCompleteWithError does not list the completed task (default session)")
    func completedTaskIsNotListed() throws {
        server.serve("/small", data: testPayload(size: 1000, seed: 5))
        let delegate = ListingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        session.dataTask(with: server.url(for: "/small")).resume()
        #expect(delegate.wait() == false, "the completed task was listed")
    }
}
}
