// The same client code built twice: `parity-foundation` against FoundationNetworking's
// URLSession, `parity-library` (this file, through a symlink, with PARITY_LIBRARY defined)
// against this library's. ForegroundParityTests runs both against the same kind of server
// and compares what they print, one `name=value` line per observable.
//
//   parity-foundation|parity-library [--container PATH] BASE-URL SCRATCH-DIRECTORY [nginx]
//
// With `nginx` the server is nginx (plain HTTP): the scenarios that need the loopback
// server's own routes (authentication) are left out, and HEAD, a range and keep-alive added.
#if PARITY_LIBRARY
import BackgroundTransfer
#else
import Foundation
import FoundationNetworking
#endif

/// A value shared between the delegate queue and the main thread.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func with<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Records every delegate call as a word, in order; answers as the scenario asks.
final class Recorder: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    let events = Shared<[String]>([])
    let pieces = Shared(0)
    let bytes = Shared(0)
    let done = DispatchSemaphore(value: 0)
    let invalid = DispatchSemaphore(value: 0)
    var disposition: URLSession.ResponseDisposition = .allow
    var followsRedirects = true
    var credential: URLCredential?
    var challengeAnswer: URLSession.AuthChallengeDisposition = .cancelAuthenticationChallenge
    var streamBody: Data?
    /// The last `didSendBodyData`'s totals; and whether the task's own counts said as much
    /// in every call.
    let lastSent = Shared<String?>(nil)
    let countsAgree = Shared(true)

    private func note(_ event: String) {
        events.with { list in
            // Runs of the same call ("data", "sent") count as one: how often depends on timing.
            if list.last != event || !["data", "sent", "wrote"].contains(event) { list.append(event) }
        }
    }

    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: Error?) {
        note("invalid(\(error.map { "\(($0 as NSError).code)" } ?? "nil"))")
        invalid.signal()
    }
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        note("response(\((response as? HTTPURLResponse)?.statusCode ?? 0))")
        completionHandler(disposition)
    }
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        pieces.with { $0 += 1 }
        bytes.with { $0 += data.count }
        note("data")
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        note("sent")
        lastSent.with { $0 = "\(totalBytesSent)/\(totalBytesExpectedToSend)" }
        // More may have been sent since the call was made, never less.
        if task.countOfBytesSent < totalBytesSent || task.countOfBytesExpectedToSend != totalBytesExpectedToSend { countsAgree.with { $0 = false } }
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        note("redirect(\(response.statusCode) \(request.url?.path ?? "?"))")
        completionHandler(followsRedirects ? request : nil)
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        note("challenge(\(challenge.protectionSpace.authenticationMethod) \(challenge.previousFailureCount))")
        if let credential, challenge.previousFailureCount == 0 { completionHandler(.useCredential, credential) } else { completionHandler(challengeAnswer, nil) }
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
        note("needNewBodyStream")
        completionHandler(streamBody.map { InputStream(data: $0) })
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
        note("metrics")
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        note("complete(\(error.map { "\(($0 as NSError).code)" } ?? "nil"))")
        done.signal()
    }
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let size = (try? FileManager.default.attributesOfItem(atPath: location.path)[.size] as? NSNumber)?.intValue ?? -1
        note("downloaded(\(size))")
        // FoundationNetworking leaves its download in NSTemporaryDirectory() once this returns;
        // Apple's URLSession removes it, and so does ours.
        try? FileManager.default.removeItem(at: location)
    }
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        note("wrote")
    }
}

/// A task's own delegate that implements the redirect question and nothing else: Apple sends
/// the task's other calls to the session's delegate.
final class RedirectsOnly: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    let asked = Shared(0)
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        asked.with { $0 += 1 }
        completionHandler(request)
    }
}

/// Answers every request itself: how tests stub networking (`protocolClasses`).
final class StubProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { request.url?.path.hasPrefix("/stubbed") == true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {
        guard let url = request.url, let response = HTTPURLResponse(url: url, statusCode: 299, httpVersion: "HTTP/1.1", headerFields: ["X-Stub": "yes"]) else { return }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data("stubbed".utf8))
        client?.urlProtocolDidFinishLoading(self)
    }
    override func stopLoading() {}
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--container" { arguments.removeFirst(min(2, arguments.count)) }
guard arguments.count == 2 || arguments.count == 3, let base = URL(string: arguments[0]) else {
    FileHandle.standardError.write(Data("usage: parity-client [--container PATH] BASE-URL SCRATCH-DIRECTORY [nginx]\n".utf8))
    exit(64)
}
let onNginx = arguments.count == 3 && arguments[2] == "nginx"
let scratch = URL(fileURLWithPath: arguments[1])
let deadline: DispatchTime = .now() + 120

@Sendable func say(_ name: String, _ value: Any?) {
    print("\(name)=\(value.map { "\($0)" } ?? "nil")")
}

@Sendable func code(_ error: Error?) -> String {
    error.map { "\(($0 as NSError).domain == NSURLErrorDomain ? "" : ($0 as NSError).domain + " ")\(($0 as NSError).code)" } ?? "nil"
}

@Sendable func status(_ response: URLResponse?) -> Int { (response as? HTTPURLResponse)?.statusCode ?? 0 }

@Sendable func request(_ path: String, method: String = "GET", body: Data? = nil) -> URLRequest {
    var made = URLRequest(url: base.appendingPathComponent(path))
    made.httpMethod = method
    made.httpBody = body
    return made
}

@Sendable func pattern(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }) }

/// Runs a delegate task to its end and reports its calls and what the task says of itself.
func delegateRun(_ name: String, recorder: Recorder = Recorder(), within limit: DispatchTime = deadline, configure: (URLSessionConfiguration) -> Void = { _ in }, make: (URLSession) -> URLSessionTask) {
    let configuration = URLSessionConfiguration.default
    configure(configuration)
    let session = URLSession(configuration: configuration, delegate: recorder, delegateQueue: nil)
    let task = make(session)
    task.resume()
    let finished = recorder.done.wait(timeout: limit) == .success
    if !finished { task.cancel() }
    session.finishTasksAndInvalidate()
    _ = recorder.invalid.wait(timeout: .now() + 10)
    say("\(name).finished", finished)
    say("\(name).events", recorder.events.with { $0 }.joined(separator: " "))
    say("\(name).status", status(task.response))
    say("\(name).error", code(task.error))
    say("\(name).state", task.state.rawValue)
    say("\(name).bytesReceived", recorder.bytes.with { $0 })
    say("\(name).countOfBytesReceived", task.countOfBytesReceived)
    say("\(name).countOfBytesSent", task.countOfBytesSent)
    if let sent = recorder.lastSent.with({ $0 }) {
        // What an upload's delegate was told of the body, and what its task says once it ended.
        say("\(name).didSendBodyData", sent)
        say("\(name).countsAgreeWhileSending", recorder.countsAgree.with { $0 })
        say("\(name).countOfBytesExpectedToSend", task.countOfBytesExpectedToSend)
        // The body bytes sent, out of its length (-1 while a stream's is unknown).
        let progress = task.progress, expected = task.countOfBytesExpectedToSend
        say("\(name).progressAgrees", progress.completedUnitCount == task.countOfBytesSent && progress.totalUnitCount == (expected > 0 ? expected : -1))
    }
    say("\(name).currentPath", task.currentRequest?.url?.path)
    say("\(name).originalMethod", task.originalRequest?.httpMethod)
}

/// Runs an async call and reports its status, body length and error.
func awaited(_ name: String, _ call: @escaping @Sendable () async throws -> (Data, URLResponse)) {
    let result = Shared<(Int, Int, String)?>(nil)
    let finished = DispatchSemaphore(value: 0)
    Task {
        do {
            let (data, response) = try await call()
            result.with { $0 = (status(response), data.count, "nil") }
        } catch {
            result.with { $0 = (0, -1, code(error)) }
        }
        finished.signal()
    }
    guard finished.wait(timeout: deadline) == .success, let (code, length, error) = result.with({ $0 }) else {
        return say("\(name).finished", false)
    }
    say("\(name).status", code)
    say("\(name).bodyLength", length)
    say("\(name).error", error)
}

/// Runs a completion-handler task and reports what its handler got.
func handled(_ name: String, within limit: DispatchTime = deadline, _ make: (@escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionTask) {
    let result = Shared<(Int, Int, String)?>(nil)
    let finished = DispatchSemaphore(value: 0)
    let task = make { data, response, error in
        result.with { $0 = (status(response), data?.count ?? -1, code(error)) }
        finished.signal()
    }
    task.resume()
    guard finished.wait(timeout: limit) == .success, let (code, length, error) = result.with({ $0 }) else {
        task.cancel()
        return say("\(name).finished", false)
    }
    say("\(name).status", code)
    say("\(name).bodyLength", length)
    say("\(name).error", error)
}

let shared = URLSession.shared
let file = scratch.appendingPathComponent("upload.bin")
try pattern(300_000).write(to: file)

// Request bodies through the shared session.
awaited("post-body") { try await shared.data(for: request("upload/post-body", method: "POST", body: pattern(100_000))) }
awaited("post-stream") {
    var streamed = request("upload/post-stream", method: "POST")
    streamed.httpBodyStream = InputStream(data: pattern(100_000))
    return try await shared.data(for: streamed)
}
awaited("upload-async-data") { try await shared.upload(for: request("upload/async-data", method: "PUT"), from: pattern(200_000)) }
awaited("upload-async-file") { try await shared.upload(for: request("upload/async-file", method: "PUT"), fromFile: file) }
handled("upload-handler-data") { shared.uploadTask(with: request("upload/handler-data", method: "POST"), from: pattern(50_000), completionHandler: $0) }
handled("upload-handler-file") { shared.uploadTask(with: request("upload/handler-file", method: "PUT"), fromFile: file, completionHandler: $0) }
handled("data-handler") { shared.dataTask(with: request("small"), completionHandler: $0) }
handled("not-found") { shared.dataTask(with: request("missing"), completionHandler: $0) }
awaited("bad-port") { try await shared.data(from: URL(string: "http://127.0.0.1:99999/x")!) }
awaited("data-from") { try await shared.data(from: base.appendingPathComponent("small")) }

// Delegate tasks.
delegateRun("upload-data") { $0.uploadTask(with: request("upload/delegate-data", method: "PUT"), from: pattern(200_000)) }
delegateRun("upload-file") { $0.uploadTask(with: request("upload/delegate-file", method: "PUT"), fromFile: file) }
let streaming = Recorder()
streaming.streamBody = pattern(70_000)
delegateRun("upload-stream", recorder: streaming) { session in
    session.uploadTask(withStreamedRequest: request("upload/delegate-stream", method: "POST"))
}
delegateRun("data-big") { $0.dataTask(with: request("big")) }
let cancelling = Recorder()
cancelling.disposition = .cancel
delegateRun("disposition-cancel", recorder: cancelling) { $0.dataTask(with: request("small")) }
delegateRun("redirect-follow") { $0.dataTask(with: request("redirect")) }
let stopping = Recorder()
stopping.followsRedirects = false
delegateRun("redirect-stop", recorder: stopping) { $0.dataTask(with: request("redirect-stop")) }
if !onNginx {
    let authenticating = Recorder()
    authenticating.credential = URLCredential(user: "ada", password: "lovelace", persistence: .forSession)
    delegateRun("auth-basic", recorder: authenticating) { $0.dataTask(with: request("protected/basic")) }
    delegateRun("auth-cancel") { $0.dataTask(with: request("protected/cancel")) }
}
delegateRun("headers", configure: { $0.httpAdditionalHeaders = ["X-Parity": "yes"] }) { $0.dataTask(with: request("headers")) }
delegateRun("stubbed", configure: { $0.protocolClasses = [StubProtocol.self] }) { $0.dataTask(with: request("stubbed/x")) }
let redirectsOnly = RedirectsOnly()
delegateRun("task-delegate", within: .now() + 10) { session in
    let task = session.dataTask(with: request("redirect-task"))
    task.delegate = redirectsOnly
    return task
}
say("task-delegate.asked", redirectsOnly.asked.with { $0 })
delegateRun("download") { $0.downloadTask(with: request("small")) }
delegateRun("download-bad-port") { $0.downloadTask(with: URL(string: "http://127.0.0.1:99999/x")!) }

// WebSocket tasks: corelibs runs them on libcurl's WebSocket support, which this machine's
// libcurl lacks; this library offers none. Both must fail loudly, with the same codes.
/// Runs `body` (an async call) and reports the error code it threw, or "nil".
func thrown(_ name: String, _ body: @escaping @Sendable () async throws -> Void) {
    let result = Shared<String?>(nil)
    let finished = DispatchSemaphore(value: 0)
    Task {
        do { try await body(); result.with { $0 = "nil" } } catch { result.with { $0 = code(error) } }
        finished.signal()
    }
    say("\(name).error", finished.wait(timeout: .now() + 10) == .success ? result.with { $0 } : "unfinished")
}
var socketParts = URLComponents(url: base.appendingPathComponent("socket"), resolvingAgainstBaseURL: false)
socketParts?.scheme = "ws"
if let socketURL = socketParts?.url {
    let recorder = Recorder()
    let session = URLSession(configuration: .default, delegate: recorder, delegateQueue: nil)
    let socket = session.webSocketTask(with: socketURL, protocols: ["echo"])
    socket.resume()
    let answers = Shared<[String]>([])
    let answered = DispatchSemaphore(value: 0)
    socket.send(.string("hello")) { error in answers.with { $0.append("send \(code(error))") }; answered.signal() }
    socket.receive { result in
        answers.with { list in
            switch result {
            case .success: list.append("receive message")
            case .failure(let error): list.append("receive \(code(error))")
            }
        }
        answered.signal()
    }
    socket.sendPing { error in answers.with { $0.append("ping \(code(error))") }; answered.signal() }
    let allAnswered = (0..<3).allSatisfy { _ in answered.wait(timeout: .now() + 10) == .success }
    say("websocket.answered", allAnswered)
    say("websocket.answers", answers.with { $0 }.sorted().joined(separator: ", "))
    say("websocket.finished", recorder.done.wait(timeout: .now() + 10) == .success)
    socket.cancel(with: .goingAway, reason: nil)
    session.finishTasksAndInvalidate()
    _ = recorder.invalid.wait(timeout: .now() + 10)
    say("websocket.events", recorder.events.with { $0 }.joined(separator: " "))
    say("websocket.error", code(socket.error))
    say("websocket.state", socket.state.rawValue)
    say("websocket.closeCode", socket.closeCode.rawValue)
    say("websocket.closeReason", socket.closeReason?.count)
    let asyncSocket = shared.webSocketTask(with: URLRequest(url: socketURL))
    asyncSocket.resume()
    thrown("websocket-async-send") { try await asyncSocket.send(.data(Data([1, 2, 3]))) }
    thrown("websocket-async-receive") { _ = try await asyncSocket.receive() }
    asyncSocket.cancel()
}

// Cookies: set by one response, sent with the next request, unless the session says not to.
handled("cookie-set") { shared.dataTask(with: request("cookie/set"), completionHandler: $0) }
handled("cookie-send") { shared.dataTask(with: request("cookie/echo"), completionHandler: $0) }
let noCookies = URLSessionConfiguration.default
noCookies.httpShouldSetCookies = false
handled("cookie-off") { URLSession(configuration: noCookies).dataTask(with: request("cookie/off"), completionHandler: $0) }
if onNginx {
    // HEAD, a byte range, and five GETs one after another on one session (the server counts
    // the connections they came on).
    handled("head") { shared.dataTask(with: request("small", method: "HEAD"), completionHandler: $0) }
    var ranged = request("big")
    ranged.setValue("bytes=100-1099", forHTTPHeaderField: "Range")
    handled("range") { shared.dataTask(with: ranged, completionHandler: $0) }
    let keeping = URLSession(configuration: .default)
    for number in 1...5 { handled("keepalive-\(number)") { keeping.dataTask(with: request("keepalive/\(number)"), completionHandler: $0) } }
} else {
    // A 401 no credential answers (corelibs waits for ever: 5 s each here).
    handled("auth-unanswered", within: .now() + 5) { shared.dataTask(with: request("protected/shared"), completionHandler: $0) }
    let defaulting = Recorder()
    defaulting.challengeAnswer = .performDefaultHandling
    delegateRun("auth-default", recorder: defaulting, within: .now() + 5) { $0.dataTask(with: request("protected/default")) }
    // A body the server cuts short (it closes the connection after part of its length).
    delegateRun("data-cut") { $0.dataTask(with: request("cut")) }
    handled("handler-cut") { shared.dataTask(with: request("cut"), completionHandler: $0) }
}
say("cookie-stored", HTTPCookieStorage.shared.cookies(for: base)?.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: ","))
HTTPCookieStorage.shared.cookies(for: base)?.forEach { HTTPCookieStorage.shared.deleteCookie($0) }
say("done", true)
exit(0)
