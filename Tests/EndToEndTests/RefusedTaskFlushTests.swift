import Foundation
import Testing
import LoopbackServer
import TransferContainer
import TransferPOSIX
import BackgroundTransfer

/// `flush` never shows a task as accepted that the daemon has ended, nor as completed without
/// its error (issue 44).
@Suite(.timeLimit(.minutes(20)))
struct RefusedTaskFlushTests {
    @Test("An upload of a file outside the app's containers is completed with -1102 after flush, never accepted")
    func refusedUploadShowsItsError() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.acceptUploads(at: "/up")

        // In the app group by its name, outside every container by what it leads to.
        let outside = container.parent.appendingPathComponent("outside.txt")
        try Data("not the app's to send".utf8).write(to: outside)
        try FileManager.default.createDirectory(at: container.appGroup, withIntermediateDirectories: true)
        let link = container.appGroup.appendingPathComponent("outside-link.txt")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)

        let url = server.url(for: "/up").absoluteString
        let outcome = try Executable.shareExtension.run(["upload", link.path, url], in: container)
        #expect(outcome.status == 2, "refused: \(outcome.stdout) \(outcome.stderr)")
        let said = outcome.stderr
        #expect(said.contains("(-1102)") && said.contains(link.path), "the error, with the path: \(said)")
        // The identifier alone on a line is what the stand-in prints for a task the daemon has.
        let lines = outcome.stdout.split(separator: "\n")
        #expect(!lines.contains("1"), "no task identifier: the task never looked accepted: \(outcome.stdout)")
        #expect(server.receivedUploads(at: "/up").isEmpty)
    }
}

extension InProcess {
/// The same in this process, with the deliveries held up: what `waitUntilDurable` (`flush`)
/// shows cannot come from the task's event, which waits behind a delegate call.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class RefusedTaskFlushLibraryTests: InProcessSuite, @unchecked Sendable {
    /// Holds the delegate queue in the first `didFinishDownloadingTo` until `release`.
    final class HeldDelegate: URLSessionDownloadDelegate, @unchecked Sendable {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let completions = Locked<[Int: Int]>([:])

        func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask,
                        didFinishDownloadingTo location: URL) {
            entered.signal()
            _ = release.wait(timeout: .now() + 30)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            completions.withLock { $0[task.taskIdentifier] = (error as NSError?)?.code ?? 0 }
        }
    }

    @Test("With deliveries held up, waitUntilDurable shows a refused upload completed with -1102, before its event")
    func refusedWhileDeliveriesWait() throws {
        server.serve("/first.bin", data: testPayload(size: 4 << 10, seed: 4405))
        server.acceptUploads(at: "/up")
        let group = container.layout.appGroup(InProcess.group)
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        let outside = container.parent.appendingPathComponent("outside.txt")
        try Data("not the app's to send".utf8).write(to: outside)
        let link = group.appendingPathComponent("outside-link.txt")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)

        let delegate = HeldDelegate()
        let configuration = URLSessionConfiguration.background(withIdentifier: "refused-at-resume")
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer {
            delegate.release.signal()
            session.invalidateAndCancel()
        }
        session.downloadTask(with: server.url(for: "/first.bin")).resume()
        let held = delegate.entered.wait(timeout: .now() + 20)
        try #require(held == .success, "the first download's call holds the queue")

        var request = URLRequest(url: server.url(for: "/up"))
        request.httpMethod = "PUT"
        let upload = session.uploadTask(with: request, fromFile: link)
        upload.resume()
        #expect(session.waitUntilDurable(timeout: 10))
        #expect(upload.state == .completed, "its end is known from the daemon's answer")
        let error = upload.error as NSError?
        let named = error?.localizedDescription.contains(link.path) == true
        #expect(error?.code == -1102 && named, "\(String(describing: error))")
        #expect(delegate.completions.withLock { $0[upload.taskIdentifier] } == nil, "its event still waits")

        delegate.release.signal()
        let delivered = waitUntil { delegate.completions.withLock { $0[upload.taskIdentifier] } == -1102 }
        #expect(delivered, "the event says the same")
        #expect(upload.state == .completed && (upload.error as NSError?)?.code == -1102)
        #expect(server.receivedUploads(at: "/up").isEmpty)
    }
}
}
