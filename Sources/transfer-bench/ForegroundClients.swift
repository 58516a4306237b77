import Foundation
import FoundationNetworking

// This file imports FoundationNetworking and not BackgroundTransfer: `URLSession` here is
// corelibs' own, the reference the foreground figures compare default sessions with.

/// One client of the foreground figures: an upload from a file, and GETs one after another.
/// Called from the benchmark's thread; each call waits for its transfers (with a deadline).
protocol ForegroundClient {
    /// Uploads the file with PUT; the server's status.
    func upload(file: URL, to url: URL, timeout: TimeInterval) throws -> Int
    /// GETs `url` `count` times, each after the last, over the session's kept-alive
    /// connection; the body bytes received.
    func get(_ url: URL, count: Int, timeout: TimeInterval) throws -> Int
}

/// FoundationNetworking's `URLSession` with completion handlers. Owned by the benchmark's thread.
struct CorelibsClient: ForegroundClient {
    let session = FoundationNetworking.URLSession(configuration: FoundationNetworking.URLSessionConfiguration.default)

    func upload(file: URL, to url: URL, timeout: TimeInterval) throws -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        return try waitFor(timeout) { done in
            session.uploadTask(with: request, fromFile: file) { _, response, error in done((response as? HTTPURLResponse)?.statusCode, error) }.resume()
        }
    }

    func get(_ url: URL, count: Int, timeout: TimeInterval) throws -> Int {
        var bytes = 0
        for _ in 0..<count {
            bytes += try waitFor(timeout) { done in
                session.dataTask(with: url) { data, _, error in done(data?.count, error) }.resume()
            }
        }
        return bytes
    }
}

/// FoundationNetworking's `URLSession` through a delegate, as the bridge must use it (a
/// data task's body comes to `didReceive data`, and its end to `didCompleteWithError` on the
/// session's serial queue), with the body handed to the caller on a second serial queue, as a
/// completion handler on an app's delegate queue: the least any wrapper built that way pays
/// (ForegroundBridge.swift). GETs only; owned by the benchmark's thread, the delegate by
/// FoundationNetworking's queue.
final class CorelibsDelegateClient: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var bodies: [Int: (body: Data, done: @Sendable (Int?, Error?) -> Void)] = [:]
    private let handlerQueue = OperationQueue()
    private var session: URLSession?

    override init() {
        super.init()
        handlerQueue.maxConcurrentOperationCount = 1
        let callbacks = OperationQueue()
        callbacks.maxConcurrentOperationCount = 1
        session = URLSession(configuration: .default, delegate: self, delegateQueue: callbacks)
    }

    func get(_ url: URL, count: Int, timeout: TimeInterval) throws -> Int {
        guard let session else { throw BenchError("no session") }
        var bytes = 0
        for _ in 0..<count {
            bytes += try waitFor(timeout) { done in
                let task = session.dataTask(with: url)
                lock.withLock { bodies[task.taskIdentifier] = (Data(), done) }
                task.resume()
            }
        }
        return bytes
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { bodies[dataTask.taskIdentifier]?.body.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        guard let gathered = lock.withLock({ bodies.removeValue(forKey: task.taskIdentifier) }) else { return }
        handlerQueue.addOperation { gathered.done(gathered.body.count, error) }
    }

    /// Ends the session (its delegate is held until then).
    func invalidate() { session?.invalidateAndCancel() }
}

/// Runs `start`, which calls `done` once with a value or an error; waits up to `timeout`.
func waitFor(_ timeout: TimeInterval, _ start: (@escaping @Sendable (Int?, Error?) -> Void) -> Void) throws -> Int {
    let finished = DispatchSemaphore(value: 0)
    let outcome = OutcomeBox()
    start { value, error in
        outcome.set(value, error)
        finished.signal()
    }
    guard finished.wait(timeout: .now() + timeout) == .success else { throw BenchError("no answer within \(Int(timeout)) s") }
    return try outcome.get()
}

/// What a transfer's completion handler reported. Written once by it, read after the wait.
final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Int?
    private var error: Error?

    func set(_ value: Int?, _ error: Error?) {
        lock.lock()
        defer { lock.unlock() }
        (self.value, self.error) = (value, error)
    }

    func get() throws -> Int {
        lock.lock()
        defer { lock.unlock() }
        if let error { throw BenchError("transfer failed: \(error)") }
        return value ?? 0
    }
}
