import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests
import TransferLogging

/// Uploads across real processes: the share extension hands an upload over and exits, the
/// daemon is killed mid-upload, and the host is relaunched with the answer (S1.6, S3.1, S6.6).
@Suite(.timeLimit(.minutes(20)))
struct UploadProcessTests {
    static let shareSession = "com.example.host.share.background"

    /// A file outside the container, as a user would pick it, and its SHA-256.
    private func pickedFile(in container: TestContainer, size: Int) throws -> (URL, String) {
        let file = container.layout.root.deletingLastPathComponent().appendingPathComponent("picked.bin")
        let payload = testPayload(size: size, seed: 7)
        try payload.write(to: file)
        return (file, SHA256.hexDigest(of: payload))
    }

    @Test("share-extension upload FILE URL exits at once; the host is relaunched with the extension's identifier and prints the server's status")
    func shareExtensionUpload() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.acceptUploads(at: "/shared", options: UploadOptions(resumable: [6]))
        let (file, digest) = try pickedFile(in: container, size: 8 << 20)
        _ = try DaemonUnderTest.start(container)

        let outcome = try Executable.shareExtension.run(["upload", file.path, server.url(for: "/shared").absoluteString, "--method", "POST"], in: container)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        // The identifier's line; a fast upload's delegate lines may come before it.
        #expect(outcome.stdout.split(separator: "\n").first { Int($0) != nil } == "1", "\(outcome.stdout)")
        let staging = container.appGroup.appendingPathComponent("Uploads")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: staging.path)) ?? []).isEmpty, "the extension's copy is gone; the daemon holds its own")
        // On a loaded machine the upload may finish while the extension still holds its session:
        // it takes the events itself, as an extension does on iOS, and the host is not needed.
        if outcome.stdout.contains("didCompleteWithError(nil): task 1, HTTP 200") {
            #expect(outcome.stdout.contains(digest), "the server's answer reaches the extension: \(outcome.stdout)")
            #expect(server.receivedUploads(at: "/shared").first?.sha256 == digest)
            return
        }

        let status = container.waitForLog { $0.process == "host-app" && $0.message.hasPrefix("didCompleteWithError(nil): task 1") }
        #expect(status?.message == "didCompleteWithError(nil): task 1, HTTP 200")
        #expect(status?.session == Self.shareSession, "relaunched with the extension's identifier")
        let answer = TransferLog.entries(layout: container.layout).first { $0.process == "host-app" && $0.message.hasPrefix("didReceive: task 1") }
        #expect(answer?.message.contains(digest) == true, "the server's answer reaches the host: \(String(describing: answer?.message))")
        #expect(server.receivedUploads(at: "/shared").first?.sha256 == digest)
        #expect(container.waitForCompletionHandler(of: "host-app") != nil)
    }

    @Test("transferd killed with SIGKILL at half of a resumable upload: the restarted daemon asks the server and sends only the rest")
    func daemonKilledMidUpload() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let size = 64 << 20
        server.acceptUploads(at: "/killed", options: UploadOptions(storage: .countOnly, resumable: [6], bytesPerSecond: 16 << 20))
        let (file, _) = try pickedFile(in: container, size: size)
        let first = try DaemonUnderTest.start(container)

        let outcome = try Executable.shareExtension.run(["upload", file.path, server.url(for: "/killed").absoluteString], in: container)
        try #require(outcome.status == 0, "\(outcome.stderr)")
        try #require(waitUntil(timeout: 30) { server.uploadBytesReceived >= Int64(size / 2) }, "the upload did not start")
        first.process.kill(signal: SIGKILL)
        _ = first.process.wait(timeout: 10)
        let atKill = server.uploadBytesReceived

        server.acceptUploads(at: "/killed", options: UploadOptions(storage: .countOnly, resumable: [6]))  // full speed now
        _ = try DaemonUnderTest.start(container)
        let status = container.waitForLog(timeout: 60) { $0.process == "host-app" && $0.isDidCompleteWithError }
        #expect(status?.message == "didCompleteWithError(nil): task 1, HTTP 201")
        let upload = server.receivedUploads(at: "/killed").first
        #expect(upload?.byteCount == Int64(size))
        let sentAgain = server.uploadBytesReceived - Int64(size)
        print("upload killed at \(atKill) of \(size) bytes; bytes sent again: \(sentAgain)")
        #expect(sentAgain == 0, "the server kept every byte it received; the daemon resumed at its offset")
        // (The cut-off PUT is logged when the server notices it ended, which may be after the HEAD.)
        #expect(server.requests.map(\.method).sorted() == ["HEAD", "PATCH", "PUT"], "\(server.requests.map(\.method))")
        #expect(server.requests.last?.method == "PATCH")
    }
}
