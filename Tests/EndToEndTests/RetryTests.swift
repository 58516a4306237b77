import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// The daemon retries network trouble by itself and resumes from the bytes on disk (S6.4).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class RetryTests: InProcessSuite, @unchecked Sendable {

    @Test("A connection dropped mid-body is retried and resumed with Range; the file is whole")
    func droppedConnectionResumes() throws {
        let payload = testPayload(size: 3 << 20, seed: 77)
        var options = RouteOptions()
        options.dropAfterBytes = 1 << 20
        server.serve("/drop.bin", data: payload, options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("drop", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/drop.bin"))
        task.resume()
        // After the first drop (the daemon says it retries), serve the rest normally.
        #expect(container.waitForRetries(1, of: task.taskIdentifier, in: "drop", family: InProcess.family.rawValue) != nil)
        options.dropAfterBytes = nil
        server.serve("/drop.bin", data: payload, options: options)
        #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
        let ranged = server.requests.filter { $0.path == "/drop.bin" }.compactMap { $0.header("Range") }
        #expect(ranged.contains { $0.hasPrefix("bytes=") && $0 != "bytes=0-" }, "the retry resumed from the bytes on disk: \(ranged)")
        #expect(server.bytesSent < Int64(payload.count) + (2 << 20), "not fetched again from zero")
        session.invalidateAndCancel()
    }

    @Test("503 and 429 with Retry-After are retried after the delay, not delivered, for a download and an upload (S6.4)", arguments: [503, 429])
    func comeBackLaterIsRetried(status: Int) throws {
        server.serve("/busy", data: Data("busy".utf8), options: RouteOptions(status: status, retryAfter: 1))
        server.acceptUploads(at: "/busy-inbox", options: UploadOptions(status: status, retryAfter: 1))
        let outbox = container.layout.appGroup(InProcess.group).appendingPathComponent("Outbox")
        try FileManager.default.createDirectory(at: outbox, withIntermediateDirectories: true)
        let file = outbox.appendingPathComponent("report.bin")
        try testPayload(size: 64 << 10, seed: 3).write(to: file)
        let delegate = RecordingDelegate()
        let session = fixture.session("busy", delegate: delegate)
        let download = session.downloadTask(with: server.url(for: "/busy"))
        var request = URLRequest(url: server.url(for: "/busy-inbox"))
        request.httpMethod = "PUT"
        let upload = session.uploadTask(with: request, fromFile: file)
        download.resume()
        upload.resume()

        // Each is held with the server's request as its typed cause, in its record and the log.
        let asked = RetryCause.serverAskedToWait(status: status, seconds: 1)
        for task in [download, upload] {
            let held = container.waitForRetries(1, of: task.taskIdentifier, in: "busy", family: InProcess.family.rawValue)
            #expect(held?.retryCause == asked, "task \(task.taskIdentifier): \(String(describing: held?.retryCause))")
            #expect(container.waitForLog { $0.process == "transferd" && $0.task == task.taskIdentifier && $0.retry?.cause == asked } != nil)
        }
        let payload = Data("available now".utf8)
        server.serve("/busy", data: payload)
        server.acceptUploads(at: "/busy-inbox")
        #expect(delegate.wait { if case .completed(download.taskIdentifier, nil, 200) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.calls.contains(.finishedDownloading(task: download.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
        #expect(delegate.wait { if case .completed(upload.taskIdentifier, nil, let code?) = $0 { return (200..<300).contains(code) } else { return false } }, "\(delegate.calls)")
        #expect(server.receivedUploads(at: "/busy-inbox").contains { $0.byteCount == 64 << 10 }, "the upload was sent again and taken")
        let times = server.requests.filter { $0.path == "/busy" }.map(\.time)
        #expect(times.count >= 2)
        if times.count >= 2 { #expect(times[1].timeIntervalSince(times[0]) >= 0.9, "waited for Retry-After") }
        session.invalidateAndCancel()
    }

    @Test("Connection refused is retried until the server appears")
    func refusedThenServed() throws {
        // A port with no listener: take one from a server and stop it.
        let later = try LoopbackServer()
        let port = later.port
        later.stop()
        let delegate = RecordingDelegate()
        let session = fixture.session("refused", delegate: delegate)
        let task = session.downloadTask(with: URL(string: "http://127.0.0.1:\(port)/late")!)
        task.resume()
        #expect(container.waitForRetries(1, of: task.taskIdentifier, in: "refused", family: InProcess.family.rawValue) != nil, "the daemon retries")
        #expect(delegate.calls.isEmpty, "no failure reaches the delegate while retrying")
        // The server appears on that port: the next retry (backoff 0.25, 0.5, 1 s …) gets it.
        let appeared = try LoopbackServer(port: port)
        defer { appeared.stop() }
        let payload = testPayload(size: 64 << 10, seed: 9)
        appeared.serve("/late", data: payload)
        #expect(delegate.wait(timeout: 30) { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
        #expect(appeared.requests.filter { $0.path == "/late" }.count == 1)
        session.invalidateAndCancel()
    }
}
}
