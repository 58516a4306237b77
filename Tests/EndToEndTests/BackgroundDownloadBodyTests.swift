import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer
import Digests

/// A background session's download task whose request has a body (a POST to a search API
/// that answers with a file): the daemon keeps the `httpBody` (up to 1 MiB) with the task and
/// sends it with every request, also after being killed; a bigger body and an
/// `httpBodyStream` are refused at creation, saying why, and nothing reaches the server.
/// Real daemon, real loopback server.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class BackgroundDownloadBodyTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// A route that answers POST with `payload`, as GET.
    func servePOST(_ path: String, _ payload: Data, bytesPerSecond: Int? = nil) {
        var options = RouteOptions()
        options.answersPOST = true
        options.bytesPerSecond = bytesPerSecond
        server.serve(path, data: payload, options: options)
    }

    func postRequest(_ path: String, body: Data) -> URLRequest {
        var request = URLRequest(url: server.url(for: path))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = body
        return request
    }

    /// The names in the session's cache folder that are kept request bodies (given at creation,
    /// or with the new request of `willBeginDelayedRequest`).
    func keptBodies(_ session: String) -> [String] {
        let folder = container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer/\(session)")
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".body") || $0.hasSuffix(".new-body") }
    }

    /// A task of `request` held by `earliestBeginDate` in a new session, whose delegate answers
    /// `willBeginDelayedRequest` with `.useNewRequest` and `newRequest`; resumed.
    func delayedTask(_ request: URLRequest, replacedBy newRequest: URLRequest, session name: String) -> (URLSession, RecordingDelegate, URLSessionDownloadTask) {
        let delegate = RecordingDelegate()
        let replacement = UncheckedBox(newRequest)
        delegate.delayedRequestAnswer = { _ in (.useNewRequest, replacement.value) }
        let session = fixture.session(name, delegate: delegate)
        let task = session.downloadTask(with: request)
        task.earliestBeginDate = Date().addingTimeInterval(0.3)
        task.resume()
        return (session, delegate, task)
    }

    @Test("willBeginDelayedRequest .useNewRequest with another body (S5.1): the server receives the new request's URL, method, headers and body, never the body the task was made with")
    func newRequestBodyReplacesKept() throws {
        _ = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 200_000, seed: 21)
        servePOST("/search-old", Data("stale".utf8))
        servePOST("/search-new", payload)
        let oldBody = testPayload(size: 70_000, seed: 22)
        let newBody = testPayload(size: 5_000, seed: 23)
        var fresh = postRequest("/search-new", body: newBody)
        fresh.setValue("fresh", forHTTPHeaderField: "X-Query")
        let (session, delegate, task) = delayedTask(postRequest("/search-old", body: oldBody), replacedBy: fresh, session: "post-replaced")
        defer { session.invalidateAndCancel() }
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload), "the new request's answer is the file")
        #expect(server.requests.filter { $0.path == "/search-old" }.isEmpty)
        let received = server.requests.filter { $0.path == "/search-new" }
        #expect(received.count == 1)
        #expect(received.first?.method == "POST")
        #expect(received.first?.body == newBody, "the new body: \(received.first?.bodyLength ?? -1) bytes of \(newBody.count); the old one has \(oldBody.count)")
        #expect(received.first?.header("Content-Length") == String(newBody.count))
        #expect(received.first?.header("X-Query") == "fresh")
        #expect(session.waitUntilDurable(timeout: 10))
        #expect(keptBodies("post-replaced").isEmpty, "both kept bodies are removed: \(keptBodies("post-replaced"))")
    }

    @Test("willBeginDelayedRequest .useNewRequest without a body (S5.1): a POST made with a body becomes a GET that sends none")
    func newRequestWithoutBodySendsNone() throws {
        _ = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 30_000, seed: 24)
        servePOST("/report", Data("stale".utf8))
        server.serve("/report.bin", data: payload)
        let (session, delegate, task) = delayedTask(postRequest("/report", body: testPayload(size: 40_000, seed: 25)),
                                                    replacedBy: URLRequest(url: server.url(for: "/report.bin")), session: "post-to-get")
        defer { session.invalidateAndCancel() }
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        let received = server.requests.filter { $0.path == "/report.bin" }
        #expect(received.count == 1)
        #expect(received.first?.method == "GET")
        #expect(received.first?.bodyLength == 0, "no body: \(received.first?.bodyLength ?? -1) bytes")
        #expect(received.first?.header("Content-Length") == nil)
        #expect(server.requests.filter { $0.path == "/report" }.isEmpty)
    }

    @Test("willBeginDelayedRequest .useNewRequest with a body past 1 MiB (-1103) or an httpBodyStream (-1) ends the task as at creation; the server gets no request",
          arguments: ["too-long", "stream"])
    func newRequestBodyRefused(_ kind: String) throws {
        _ = try DaemonUnderTest.start(container)
        server.serve("/plain", data: Data("plain".utf8))
        servePOST("/search", Data("never".utf8))
        var fresh = URLRequest(url: server.url(for: "/search"))
        fresh.httpMethod = "POST"
        if kind == "stream" {
            fresh.httpBodyStream = InputStream(data: testPayload(size: 10_000, seed: 26))
        } else {
            fresh.httpBody = testPayload(size: TransferLimits.requestBodyBytes + 1, seed: 27)
        }
        let code = kind == "stream" ? -1 : URLError.Code.dataLengthExceedsMaximum.rawValue
        let (session, delegate, task) = delayedTask(URLRequest(url: server.url(for: "/plain")), replacedBy: fresh, session: "new-body-\(kind)")
        defer { session.invalidateAndCancel() }
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: code, status: nil) }, "\(delegate.calls)")
        let message = (task.error as? URLError)?.localizedDescription ?? ""
        #expect(message.contains(kind == "stream" ? "httpBodyStream" : "\(TransferLimits.requestBodyBytes)"), "\(message)")
        #expect(server.requests.isEmpty, "nothing sent: \(server.requests.map(\.path))")
        #expect(session.waitUntilDurable(timeout: 10))
        #expect(keptBodies("new-body-\(kind)").isEmpty)
    }

    @Test("The server receives the exact body bytes of a background POST download task (0 bytes, 1 byte, the 1 MiB limit), and the answer is the downloaded file",
          arguments: [0, 1, TransferLimits.requestBodyBytes])
    func bodySent(_ size: Int) throws {
        _ = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 300_000, seed: 7)
        servePOST("/search", payload)
        let body = testPayload(size: size, seed: 89)
        let delegate = RecordingDelegate()
        let session = fixture.session("post-\(size)", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: postRequest("/search", body: body))
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload), "the answer is the file")
        let received = server.requests.filter { $0.path == "/search" }
        #expect(received.count == 1)
        #expect(received.first?.method == "POST")
        #expect(received.first?.body == body, "the exact body: \(received.first?.bodyLength ?? -1) of \(body.count) bytes")
        #expect(received.first?.header("Content-Length") == String(size))
        #expect(received.first?.header("Content-Type") == "application/json")
        #expect(session.waitUntilDurable(timeout: 10))
        #expect(keptBodies("post-\(size)").isEmpty, "the daemon's copy of the body is removed when the task ends")
    }

    /// Makes a download task of `request` in a new session and expects it to end at once with
    /// `code` and nothing sent; the error it ended with.
    func refusedAtCreation(_ request: URLRequest, session name: String, code: Int) -> URLError? {
        let delegate = RecordingDelegate()
        let session = fixture.session(name, delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: request)
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: code, status: nil) }, "\(delegate.calls)")
        #expect(session.waitUntilDurable(timeout: 10))
        #expect(server.requests.isEmpty, "no request reached the server: \(server.requests.map(\.path))")
        return task.error as? URLError
    }

    @Test("A body one byte past the 1 MiB limit is refused at creation with -1103 naming the limit; the server gets no request")
    func bodyPastLimitRefused() throws {
        _ = try DaemonUnderTest.start(container)
        servePOST("/search", Data("never".utf8))
        let error = refusedAtCreation(postRequest("/search", body: testPayload(size: TransferLimits.requestBodyBytes + 1)), session: "post-too-big",
                                      code: URLError.Code.dataLengthExceedsMaximum.rawValue)
        #expect(error?.localizedDescription.contains("\(TransferLimits.requestBodyBytes)") == true, "\(String(describing: error))")
        #expect(error?.failureURLString == server.url(for: "/search").absoluteString, "the error names the URL")
    }

    @Test("A background download task with an httpBodyStream ends at once with -1 (bodies come from a file), and the server gets no request")
    func streamRefused() throws {
        _ = try DaemonUnderTest.start(container)
        servePOST("/report", Data("the report".utf8))
        var request = URLRequest(url: server.url(for: "/report"))
        request.httpMethod = "POST"
        request.httpBodyStream = InputStream(data: testPayload(size: 10_000, seed: 89))
        let error = refusedAtCreation(request, session: "download-body-stream", code: -1)
        #expect(error?.localizedDescription.contains("httpBodyStream") == true, "\(String(describing: error))")
    }

    @Test("transferd SIGKILLed in the middle of a POST download: the restarted daemon sends the request again with the same body, and the file is whole")
    func bodySentAgainAfterDaemonKill() throws {
        let daemon = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 4 << 20, seed: 11)
        servePOST("/export", payload, bytesPerSecond: 512 << 10)
        let body = testPayload(size: 70_000, seed: 12)
        let delegate = RecordingDelegate()
        let session = fixture.session("post-killed", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: postRequest("/export", body: body))
        task.resume()
        #expect(delegate.wait { if case .wroteData(task.taskIdentifier, _, _) = $0 { return true } else { return false } }, "bytes arrived before the kill: \(delegate.calls)")
        daemon.process.kill()
        #expect(!daemon.process.wait(timeout: 10).timedOut)
        servePOST("/export", payload) // full speed from now on
        _ = try DaemonUnderTest.start(container)

        #expect(delegate.wait(timeout: 60) { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload), "the whole file, not a splice")
        let received = server.requests.filter { $0.path == "/export" }
        #expect(received.count >= 2, "sent again after the restart: \(received.count)")
        #expect(received.allSatisfy { $0.method == "POST" && $0.body == body }, "every request carried the body: \(received.map { "\($0.method) \($0.bodyLength)" })")
    }
}
}

/// A request handed to the delegate queue's answer: the test makes it, the delegate only reads it.
private final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
