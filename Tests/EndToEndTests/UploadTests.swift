import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests
import TransferPOSIX

/// Background uploads from a file through the daemon to the loopback server (S2.1, S6.6):
/// the bytes the server received are checked by their SHA-256.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class UploadTests: InProcessSuite, @unchecked Sendable {
    /// A deterministic file of `size` bytes in the test app group, and its SHA-256.
    private func outboxFile(_ name: String, size: Int) throws -> (URL, String) {
        let directory = container.layout.appGroup(InProcess.group).appendingPathComponent("Outbox")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent(name)
        let payload = testPayload(size: size, seed: UInt64(size))
        try payload.write(to: file)
        return (file, SHA256.hexDigest(of: payload))
    }

    private func request(_ path: String, method: String = "PUT", interopVersion: Int? = nil) -> URLRequest {
        var request = URLRequest(url: server.url(for: path))
        request.httpMethod = method
        if let interopVersion { request.setValue(String(interopVersion), forHTTPHeaderField: "Upload-Draft-Interop-Version") }
        return request
    }

    private func completed(_ task: URLSessionTask) -> (RecordingDelegate.Call) -> Bool {
        { if case .completed(task.taskIdentifier, _, _) = $0 { return true } else { return false } }
    }

    /// The `{"bytes":N,"sha256":"…"}` answer the loopback server gives a finished upload.
    private func answer(_ data: Data?) -> (bytes: Int64, sha256: String?)? {
        guard let data, let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let bytes = (object["bytes"] as? NSNumber)?.int64Value else { return nil }
        return (bytes, object["sha256"] as? String)
    }

    @Test("PUT and POST from a file: progress, then the server's answer through didReceive data, then didCompleteWithError(nil) with its status")
    func putAndPost() throws {
        server.acceptUploads(at: "/inbox")
        let (file, digest) = try outboxFile("report.bin", size: 4 << 20)
        let delegate = RecordingDelegate()
        let session = fixture.session("uploads", delegate: delegate)

        for (method, status) in [("PUT", 201), ("POST", 200)] {
            let task = session.uploadTask(with: request("/inbox", method: method), fromFile: file)
            #expect(task.state == .suspended)
            task.resume()
            #expect(delegate.wait(for: completed(task)), "\(method): \(delegate.calls)")
            let calls = delegate.calls
            let received = calls.firstIndex { if case .receivedData(task.taskIdentifier, _) = $0 { return true } else { return false } }
            let done = calls.firstIndex(of: .completed(task: task.taskIdentifier, code: nil, status: status))
            #expect(received != nil && done != nil && received! < done!, "\(method): didReceive data, then didCompleteWithError(nil): \(calls)")
            #expect(calls.contains { if case .sentBody(task.taskIdentifier, 4 << 20, 4 << 20) = $0 { return true } else { return false } }, "progress reaches the whole body")
            let reply = answer(delegate.receivedBodies[task.taskIdentifier])
            #expect(reply?.bytes == 4 << 20)
            #expect(reply?.sha256 == digest, "the server received exactly the file")
            #expect(task.countOfBytesSent == 4 << 20)
            #expect(task.countOfBytesExpectedToSend == 4 << 20)
        }
        #expect(server.receivedUploads(at: "/inbox").map(\.method) == ["PUT", "POST"])
        #expect(server.receivedUploads(at: "/inbox").allSatisfy { $0.sha256 == digest })
        session.invalidateAndCancel()
    }

    @Test("A 256 MiB upload arrives whole, streamed (the daemon never holds the file in memory)")
    func largeUpload() throws {
        server.acceptUploads(at: "/large")
        let (file, digest) = try outboxFile("large.bin", size: 256 << 20)
        let delegate = RecordingDelegate()
        let session = fixture.session("large", delegate: delegate)
        let task = session.uploadTask(with: request("/large"), fromFile: file)
        task.resume()
        #expect(delegate.wait(timeout: 120, for: completed(task)))
        #expect(delegate.calls.contains(.completed(task: task.taskIdentifier, code: nil, status: 201)), "\(delegate.calls.suffix(3))")
        #expect(server.receivedUploads(at: "/large").first?.sha256 == digest)
        session.invalidateAndCancel()
    }

    @Test("Resumable upload (draft interop 3, 5, 6): a dropped connection goes on from the server's offset with HEAD + PATCH, sending nothing twice",
          arguments: [3, 5, 6])
    func droppedConnectionResumes(version: Int) throws {
        let size = 32 << 20
        server.acceptUploads(at: "/resumable", options: UploadOptions(resumable: [3, 5, 6], dropAfterBytes: Int64(size / 2)))
        let (file, digest) = try outboxFile("resumable.bin", size: size)
        let delegate = RecordingDelegate()
        let session = fixture.session("resumable-\(version)", delegate: delegate)
        let task = session.uploadTask(with: request("/resumable", interopVersion: version), fromFile: file)
        task.resume()
        #expect(delegate.wait(timeout: 60, for: completed(task)))
        #expect(delegate.calls.contains(.completed(task: task.taskIdentifier, code: nil, status: 201)), "\(delegate.calls.suffix(3))")
        let upload = server.receivedUploads(at: "/resumable").first
        #expect(upload?.sha256 == digest)
        #expect(upload?.resumable == true)
        // (A cut-off PUT is logged when the server is done with it, which may be after the HEAD.)
        let methods = server.requests.map(\.method)
        #expect(methods.sorted() == ["HEAD", "PATCH", "PUT"] && methods.last == "PATCH", "\(methods)")
        #expect(server.requests.allSatisfy { $0.headers.values(for: "Upload-Draft-Interop-Version") == [String(version)] })
        #expect(server.uploadBytesReceived == Int64(size), "not one byte sent twice: \(server.uploadBytesReceived)")
        session.invalidateAndCancel()
    }

    @Test("The server disagrees about the offset (409): the daemon asks again and finishes")
    func conflictAsksAgain() throws {
        let size = 8 << 20
        server.acceptUploads(at: "/conflict", options: UploadOptions(resumable: [6], dropAfterBytes: Int64(size / 4), conflictOnce: true))
        let (file, digest) = try outboxFile("conflict.bin", size: size)
        let delegate = RecordingDelegate()
        let session = fixture.session("conflict", delegate: delegate)
        let task = session.uploadTask(with: request("/conflict"), fromFile: file)
        task.resume()
        #expect(delegate.wait(timeout: 60, for: completed(task)))
        #expect(server.receivedUploads(at: "/conflict").first?.sha256 == digest)
        #expect(server.requests.map(\.method).filter { $0 != "PUT" } == ["HEAD", "PATCH", "HEAD", "PATCH"], "\(server.requests.map(\.method))")
        session.invalidateAndCancel()
    }

    @Test("A server without resumable uploads: a dropped upload is sent again from zero, and cancel gives no resume data")
    func plainServerRestartsFromZero() throws {
        let size = 8 << 20
        server.acceptUploads(at: "/plain", options: UploadOptions(dropAfterBytes: Int64(size / 2)))
        let (file, digest) = try outboxFile("plain.bin", size: size)
        let delegate = RecordingDelegate()
        let session = fixture.session("plain", delegate: delegate)
        let task = session.uploadTask(with: request("/plain"), fromFile: file)
        task.resume()
        #expect(delegate.wait(timeout: 60, for: completed(task)))
        #expect(server.receivedUploads(at: "/plain").first?.sha256 == digest)
        #expect(server.requests.map(\.method) == ["PUT", "PUT"])
        #expect(server.uploadBytesReceived == Int64(size + size / 2))

        server.acceptUploads(at: "/plain-slow", options: UploadOptions(bytesPerSecond: 1 << 20))
        let slowTask = session.uploadTask(with: request("/plain-slow"), fromFile: file)
        slowTask.resume()
        #expect(waitUntil { self.server.uploadBytesReceived > Int64(size + size / 2) + (256 << 10) })
        let resumeData = Locked<Data??>(nil)
        slowTask.cancel { data in resumeData.withLock { $0 = .some(data) } }
        #expect(waitUntil { resumeData.withLock { $0 } != nil })
        #expect(resumeData.withLock { $0 } == .some(nil), "no resume data from a plain server")
        #expect(delegate.wait { $0 == .completed(task: slowTask.taskIdentifier, code: NSURLErrorCancelled, status: nil) })
        session.invalidateAndCancel()
    }

    @Test("cancel(byProducingResumeData:) on a resumable upload, then uploadTask(withResumeData:) continues from the server's offset")
    func cancelAndResume() throws {
        let size = 8 << 20
        server.acceptUploads(at: "/paused", options: UploadOptions(resumable: [6], bytesPerSecond: 2 << 20))
        let (file, digest) = try outboxFile("paused.bin", size: size)
        let delegate = RecordingDelegate()
        let session = fixture.session("paused", delegate: delegate)
        let task = session.uploadTask(with: request("/paused"), fromFile: file)
        task.resume()
        #expect(waitUntil { self.server.uploadBytesReceived > 1 << 20 })
        let produced = Locked<Data??>(nil)
        task.cancel { data in produced.withLock { $0 = .some(data) } }
        #expect(waitUntil { produced.withLock { $0 } != nil })
        let resumeData = try #require(produced.withLock { $0 } ?? nil, "a server that offered resumption gives resume data")
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: NSURLErrorCancelled, status: nil) })
        #expect((delegate.errors[task.taskIdentifier] as NSError?)?.userInfo[NSURLSessionUploadTaskResumeData] as? Data == resumeData)

        server.acceptUploads(at: "/paused", options: UploadOptions(resumable: [6]))  // full speed now
        let before = server.uploadBytesReceived
        try FileManager.default.removeItem(at: file)  // the daemon kept what it needs
        let resumed = session.uploadTask(withResumeData: resumeData)
        resumed.resume()
        #expect(delegate.wait(timeout: 60, for: completed(resumed)))
        #expect(delegate.calls.contains(.completed(task: resumed.taskIdentifier, code: nil, status: 201)), "\(delegate.calls.suffix(3))")
        #expect(server.receivedUploads(at: "/paused").first?.sha256 == digest)
        #expect(before + (server.uploadBytesReceived - before) == Int64(size), "the rest only: \(before) then \(server.uploadBytesReceived)")
        #expect(Array(server.requests.map(\.method).filter { $0 != "PUT" }.suffix(2)) == ["HEAD", "PATCH"])

        let again = session.uploadTask(withResumeData: resumeData)
        again.resume()
        #expect(delegate.wait { if case .completed(again.taskIdentifier, NSURLErrorCannotOpenFile, _) = $0 { return true } else { return false } }, "resume data is single-use: \(delegate.calls.suffix(2))")
        session.invalidateAndCancel()
    }
}
}
