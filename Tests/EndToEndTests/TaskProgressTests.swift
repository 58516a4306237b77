import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferPOSIX

/// `URLSessionTask.progress` of a default session's data task: Apple's counts the body bytes
/// received, whenever it is read. The task makes its `Progress` when first asked (issue 27),
/// so both orders are held here: read only after the end, and read first, then after the end.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(2)))
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
}
}
