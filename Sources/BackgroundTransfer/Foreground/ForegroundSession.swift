import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// What a default session's data or upload task sends as its body.
enum ForegroundBody {
    /// The request's own `httpBody` or `httpBodyStream`, if any (a data task).
    case request
    case data(Data)
    case file(URL)
    /// `httpBodyStream`, asked again through `needNewBodyStream` (`uploadTask(withStreamedRequest:)`).
    case stream
}

/// The FoundationNetworking `URLSession` behind one default session of ours, which carries
/// out its data and upload tasks (see ForegroundBridge.swift for why), and the making of
/// this library's task objects around FoundationNetworking's. Made once per default session,
/// on its first such task; thread-safe (FoundationNetworking's session is).
final class ForegroundSession: @unchecked Sendable {
    let bridge: ForegroundBridge
    let inner: FoundationNetworking.URLSession

    init(configuration: URLSessionConfiguration, delegate: URLSessionDelegate?, delegateQueue: OperationQueue, session: @escaping @Sendable () -> URLSession?, finished: @escaping @Sendable (URLSessionTask) -> Void) {
        bridge = ForegroundBridge(delegate: delegate, delegateQueue: delegateQueue, session: session, finished: finished)
        bridge.cookies = ForegroundCookies(configuration: configuration)
        inner = FoundationNetworking.URLSession(configuration: configuration.foundationConfiguration(), delegate: bridge, delegateQueue: bridge.callbackQueue)
    }

    /// Our task of kind `Task` around FoundationNetworking's task for `request` and `body`,
    /// numbered `identifier`, suspended. With `handler`, the outcome goes to it (on
    /// `delegateQueue`) instead of the delegate's data calls, as FoundationNetworking does.
    func makeTask<Task: URLSessionTask>(_ request: URLRequest, body: ForegroundBody, record: TaskRecord, backend: any SessionBackend, as make: (TaskRecord) -> Task,
                                        handler: (@Sendable (Data?, URLResponse?, Error?) -> Void)?) -> Task {
        let made = make(record)
        made.backend = backend
        bridge.cookies?.load(for: request.url)
        let inner: FoundationNetworking.URLSessionTask
        if let handler {
            made.prefersIncrementalDelivery = false // Apple's default for a completion handler's task
            let bridge = self.bridge
            let queue = bridge.delegateQueue
            let finish: @Sendable (Data?, URLResponse?, Error?) -> Void = { [weak made] data, response, error in
                guard let made, let innerTask = made.foundationTask else { return }
                let forgotten = bridge.forget(innerTask)
                let outcome = forgotten.endedOnChallenge ? nil : forgotten.failure ?? ForegroundErrors.apples(error)
                let body = forgotten.endedOnChallenge ? data ?? Data() : data
                let answer = response ?? innerTask.response
                made.noteReceived(Int64(body?.count ?? 0))
                made.finish(with: outcome)
                made.setState(.completed)
                bridge.cookies?.save(from: answer?.url) // before the handler hears of the end, as for delegates
                queue.addOperation {
                    handler(outcome == nil ? body : nil, answer, outcome)
                    bridge.complete(made, with: outcome, delegate: nil, savingCookies: false)
                }
            }
            // The bridge gathers the body of FoundationNetworking's task (it has no completion
            // handler), so that a 401 or 407 the task ends on reaches the handler with its body.
            // Uploads past `gatheredUploadBytes` keep FoundationNetworking's completion handler
            // (and an empty body after such a 401): as delegate tasks its uploads from a file took
            // 2.2 times as long (transfer-bench foreground, 256 MiB; a delegate call per piece sent).
            let gathers = Self.gathersBody(body)
            switch body {
            case .request, .stream: inner = self.inner.dataTask(with: request)
            case .data(let data): inner = gathers ? self.inner.uploadTask(with: request, from: data) : self.inner.uploadTask(with: request, from: data, completionHandler: finish)
            case .file(let url): inner = gathers ? self.inner.uploadTask(with: request, fromFile: url) : self.inner.uploadTask(with: request, fromFile: url, completionHandler: finish)
            }
            if gathers { bridge.gatherBody(of: inner, for: finish) }
        } else {
            switch body {
            case .request: inner = self.inner.dataTask(with: request)
            case .data(let data): inner = self.inner.uploadTask(with: request, from: data)
            case .file(let url): inner = self.inner.uploadTask(with: request, fromFile: url)
            case .stream: inner = self.inner.uploadTask(withStreamedRequest: request)
            }
        }
        made.foundationTask = inner
        bridge.register(made, for: inner)
        return made
    }

    /// Largest upload body sent by a delegate task whose answer the bridge gathers for a
    /// completion handler: a few dozen pieces, whose delegate calls cost little.
    static let gatheredUploadBytes = 1 << 20

    /// Whether a completion handler's task of `body` is one whose answer the bridge gathers.
    private static func gathersBody(_ body: ForegroundBody) -> Bool {
        switch body {
        case .request, .stream: true
        case .data(let data): data.count <= gatheredUploadBytes
        case .file(let url): ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size]) as? Int ?? .max) <= gatheredUploadBytes
        }
    }
}
