import Foundation
import FoundationNetworking
import TransferPOSIX

// Default sessions: who carries out what.
//
// Download tasks stay on this project's transport (LocalSessionCore): it runs at curl's
// speed and `cancel(byProducingResumeData:)` leaves bytes a background session continues
// from, which corelibs' download tasks cannot do. Data and upload tasks (every body form:
// `httpBody`, `httpBodyStream`, from Data, from a file, from a stream) go to one
// FoundationNetworking `URLSession` per default session, through this bridge: redirects,
// 401/407 with `URLCredentialStorage`, cookies, `URLCache`, `protocolClasses` and data as it
// arrives are then corelibs' own, and the differential test (ForegroundParityTests) holds the
// two to the same observables.
//
// Measured before deciding (a quick script: curl, and a swiftc -O program with
// FoundationNetworking's URLSession, against nginx on 127.0.0.1; medians of 3, the 2 cores
// shared with builds, load average 17):
//   1 GiB upload from a file:  curl -T 2.43 s; FoundationNetworking 11.7 s (4.8× curl);
//                              the daemon's transport 1.05× curl (README, Figures)
//   10,000 GETs of 1 KiB over keep-alive, one after another:
//                              curl 5.49 s; FoundationNetworking 27.2 s (4.9× curl)
// and after it, `transfer-bench foreground --runs 3` (debug build, LoopbackServer in the
// benchmark's process, load average 12; medians):
//   1 GiB upload from a file:  curl 1.13 s; FoundationNetworking 20.9 s; a default session
//                              23.1 s (1.12× FoundationNetworking, ranges overlapping)
//   10,000 GETs:               curl 5.66 s; FoundationNetworking 11.4 s; a default session
//                              12.4 s (0.94× FoundationNetworking, the median of the ratios)
// Issue 27, 10,000 GETs with a completion handler (release, `transfer-bench foreground --size 1
// --runs 3`, two builds alternating three times, load average 6–20; medians of 9 runs):
// 1.14× FoundationNetworking before making our task objects and records cheaper, 1.03× after
// (Benchmarks/README.md). The rest is the delegate path: FoundationNetworking through a bare
// delegate took 1.07–1.17× its own completion handlers in the same runs (three operations on
// its delegate queue a request instead of one), and the bridge needs it for completion
// handlers too, since corelibs 6.3.1 hands a completion handler nothing of a 401 no credential
// answers, whose body Apple's hands over. Tried and taken out again (issue 27, third pass,
// Benchmarks/README.md): FoundationNetworking's calls to the bridge on a serial dispatch
// queue instead of a corelibs `OperationQueue`; an A/B of the two builds did not separate them.
// Corelibs' uploads from a file cost many times curl's (its file body source; the same bytes
// as an `httpBodyStream` went 2–3× faster, but chunked, without the Content-Length Apple
// sends), and its small requests about twice curl's. Re-implementing its protocol handling
// (the delegate's redirects, 401/407 with the credential storage, cookies, the URL cache,
// `protocolClasses`) over our transport is more than this change carries, so data and upload
// tasks of default sessions cost what FoundationNetworking's do (the bridge adds a hop to
// the delegate queue). Uploads from a file are the candidate for our transport next: it runs
// them at curl's speed in background sessions today.
/// FoundationNetworking's delegate for one default session of ours: forwards each call, with
/// this library's session and task objects, to the task's own delegate or the session's, on
/// the session's delegate queue, in the order FoundationNetworking makes them (one serial
/// queue of its own, `callbackQueue`). Answers asked of the app (redirects, challenges,
/// response dispositions, body streams) go back to FoundationNetworking as the app gives them.
/// Thread-safe (one lock).
final class ForegroundBridge: NSObject, FoundationNetworking.URLSessionDataDelegate, @unchecked Sendable {
    let delegate: URLSessionDelegate?
    let delegateQueue: OperationQueue
    /// Where FoundationNetworking calls this bridge: serial, so that its calls stay in order.
    let callbackQueue: OperationQueue
    private let session: @Sendable () -> URLSession?
    /// A background session's bridge follows redirects without asking (S2.3). Set before its first task.
    var followsRedirectsSilently = false
    /// The container's cookie store this session's storage is kept in step with (S9.4). Set before its first task.
    var cookies: ForegroundCookies?
    private let finished: @Sendable (URLSessionTask) -> Void

    private struct State {
        /// Our task for each of FoundationNetworking's, by its task identifier.
        var tasks: [Int: URLSessionTask] = [:]
        /// Errors that replace FoundationNetworking's for a task (a disposition not offered).
        var failures: [Int: Error] = [:]
        /// A 401 or 407 and its body, held back until it is known whether a challenge follows
        /// (then they are dropped, as Apple's sessions never show them) or not (then delivered).
        var held: [Int: (response: URLResponse, data: [Data])] = [:]
        /// Tasks whose 401 or 407 no credential answered: they end with it, without an error.
        var endedOnChallenge: Set<Int> = []
        /// Data tasks whose delegate answered `.becomeDownload`: their body goes to a file.
        var downloads: [Int: ForegroundDownloadFile] = [:]
        /// Tasks made with a completion handler: the handler, and the body gathered for it
        /// (Apple's sessions hand such a task's response and body to the handler, not the delegate).
        var handlers: [Int: (handler: @Sendable (Data?, URLResponse?, Error?) -> Void, body: Data)] = [:]
        /// Bodies of tasks that prefer no incremental delivery: handed over in one call at the end.
        var wholeBodies: [Int: Data] = [:]
        /// Decoded body bytes of each task whose response has a `Content-Encoding`.
        var decoded: [Int: DecodedBodyCount] = [:]
    }
    private let state = Locked(State())

    init(delegate: URLSessionDelegate?, delegateQueue: OperationQueue, session: @escaping @Sendable () -> URLSession?, finished: @escaping @Sendable (URLSessionTask) -> Void) {
        self.delegate = delegate
        self.delegateQueue = delegateQueue
        self.session = session
        self.finished = finished
        callbackQueue = OperationQueue()
        callbackQueue.maxConcurrentOperationCount = 1
        callbackQueue.name = "BackgroundTransfer.foreground-callbacks"
    }

    func register(_ task: URLSessionTask, for inner: FoundationNetworking.URLSessionTask) {
        state.withLock { $0.tasks[inner.taskIdentifier] = task }
    }

    /// `inner`'s response body is gathered here and handed, when it ends, to `handler`.
    func gatherBody(of inner: FoundationNetworking.URLSessionTask, for handler: @escaping @Sendable (Data?, URLResponse?, Error?) -> Void) {
        state.withLock { $0.handlers[inner.taskIdentifier] = (handler, Data()) }
    }

    /// Appends `data` to the body gathered for a completion handler; false when `inner` has none.
    private func gather(_ data: Data, of inner: FoundationNetworking.URLSessionTask) -> Bool {
        state.withLock { state in
            guard state.handlers[inner.taskIdentifier] != nil else { return false }
            state.handlers[inner.taskIdentifier]?.body.append(data)
            return true
        }
    }

    /// Our task for `inner`, with the delegate that hears about it.
    private func ours(_ inner: FoundationNetworking.URLSessionTask) -> (task: URLSessionTask, delegate: URLSessionTaskDelegate?)? {
        guard let task = state.withLock({ $0.tasks[inner.taskIdentifier] }) else { return nil }
        return (task, task.delegate ?? delegate as? URLSessionTaskDelegate)
    }

    /// Who hears `task`'s data calls: its own delegate if that is a data delegate, else the
    /// session's (Apple's per-method fallback; TaskDelegateFallback.swift does the rest).
    private func dataDelegate(of task: URLSessionTask) -> URLSessionDataDelegate? {
        task.delegate as? URLSessionDataDelegate ?? delegate as? URLSessionDataDelegate
    }

    /// Runs `call` on the delegate queue with our session, or `otherwise` (FoundationNetworking's
    /// default answer) when the app's session object is gone.
    private func deliver(otherwise: @escaping @Sendable () -> Void = {}, _ call: @escaping @Sendable (URLSession) -> Void) {
        guard let session = session() else { return otherwise() }
        delegateQueue.addOperation { call(session) }
    }

    /// Runs `call` on the delegate queue and waits for it, so that an answer the app gives
    /// during the call reaches FoundationNetworking before this delegate method returns, as
    /// if the app were its delegate; a later answer goes back on FoundationNetworking's own
    /// queue. (An answer given from another thread while libcurl is inside a callback
    /// re-enters libcurl, which traps: CURLM_RECURSIVE_API_CALL.) `otherwise` answers when
    /// the app's session object is gone.
    private func ask(otherwise: @escaping @Sendable () -> Void, _ call: @escaping @Sendable (URLSession, ForegroundAnswer) -> Void) {
        guard let session = session() else { return otherwise() }
        let answer = ForegroundAnswer(queue: callbackQueue)
        delegateQueue.addOperations([BlockOperation { call(session, answer) }], waitUntilFinished: true)
        answer.endWait()
    }

    // MARK: Response and body

    func urlSession(_ s: FoundationNetworking.URLSession, dataTask inner: FoundationNetworking.URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping (FoundationNetworking.URLSession.ResponseDisposition) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        // Apple's sessions hand no informational (1xx) response to the delegate; corelibs
        // hands a `100 Continue` over as if it were the response.
        if let status = (response as? HTTPURLResponse)?.statusCode, (100..<200).contains(status) { return completionHandler(.allow) }
        // Corelibs hands over a 401 or 407 and its body before it asks the challenge, and the
        // answer's response and body after them: held back until it is known which it is.
        if let http = response as? HTTPURLResponse, http.statusCode == 401 || http.statusCode == 407, ours(inner) != nil {
            state.withLock { $0.held[inner.taskIdentifier] = (response, []) }
            return completionHandler(.allow)
        }
        forward(response, of: inner, answer: completionHandler)
    }

    /// Asks the app about `response` and hands its answer to `answer`.
    private func forward(_ response: URLResponse, of inner: FoundationNetworking.URLSessionDataTask, answer completionHandler: @escaping (FoundationNetworking.URLSession.ResponseDisposition) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        if state.withLock({ $0.handlers[inner.taskIdentifier] != nil }) { return completionHandler(.allow) } // the handler gets it
        guard let (task, _) = ours(inner), let dataTask = task as? URLSessionDataTask, let delegate = dataDelegate(of: task) else { return completionHandler(.allow) }
        ask(otherwise: { answer.value(.allow) }) { session, back in
            delegate.urlSession(session, dataTask: dataTask, didReceive: response) { disposition in
                switch disposition {
                case .allow: back.give { answer.value(.allow) }
                case .cancel:
                    // Corelibs goes on with the body and completes without an error; Apple's
                    // task ends there with -999.
                    self.state.withLock { $0.failures[inner.taskIdentifier] = URLError(.cancelled, userInfo: [NSURLErrorFailingURLErrorKey: response.url as Any]) }
                    back.give {
                        answer.value(.cancel)
                        inner.cancel()
                    }
                case .becomeDownload:
                    // FoundationNetworking cannot turn a data task into a download (it traps):
                    // it goes on as a data task and the bridge writes the body to a file.
                    do {
                        let download = try ForegroundDownloadFile(replacing: dataTask, expected: response.expectedContentLength)
                        self.state.withLock { state in
                            state.tasks[inner.taskIdentifier] = download.task
                            state.downloads[inner.taskIdentifier] = download
                        }
                        (dataTask.backend as? LocalSessionCore)?.replace(with: download.task) // getAllTasks lists the download
                        self.deliver { session in delegate.urlSession(session, dataTask: dataTask, didBecome: download.task) }
                        back.give { answer.value(.allow) }
                    } catch {
                        self.state.withLock { $0.failures[inner.taskIdentifier] = error }
                        back.give { answer.value(.cancel) }
                    }
                case .becomeStream:
                    // FoundationNetworking cannot turn a response into a stream (it traps):
                    // the task ends, saying so, rather than lose the body quietly.
                    let error = URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "the response disposition \(disposition) is not offered by default sessions here: use .allow or .becomeDownload",
                                                              NSURLErrorFailingURLErrorKey: response.url as Any])
                    self.state.withLock { $0.failures[inner.taskIdentifier] = error }
                    back.give { answer.value(.cancel) }
                }
            }
        }
    }

    func urlSession(_ s: FoundationNetworking.URLSession, dataTask inner: FoundationNetworking.URLSessionDataTask, didReceive data: Data) {
        // A decoder's output is bounded (TransferLimits.decodedBodyBound): past it, nothing more is kept.
        if let excess = countDecoded(data, of: inner) { return excess.map { fail(inner, with: $0) } ?? () }
        let isHeld = state.withLock { state -> Bool in
            guard var held = state.held[inner.taskIdentifier] else { return false }
            held.data.append(data)
            state.held[inner.taskIdentifier] = held
            return true
        }
        if isHeld || gather(data, of: inner) { return }
        // Nothing more of a task the app ended in `didReceive response`.
        guard state.withLock({ $0.failures[inner.taskIdentifier] }) == nil, let (task, _) = ours(inner) else { return }
        task.noteReceived(Int64(data.count)) // corelibs counts no bytes for data tasks
        if let download = state.withLock({ $0.downloads[inner.taskIdentifier] }) { return write(data, to: download, of: inner) }
        guard let dataTask = task as? URLSessionDataTask, let delegate = dataDelegate(of: task) else { return }
        if holdBack(data, of: inner, incremental: dataTask.prefersIncrementalDelivery) { return }
        deliver { session in delegate.urlSession(session, dataTask: dataTask, didReceive: data) }
    }

    /// Counts `data` against the bound on what a decoder may produce: nil within it (or for a
    /// body not encoded); past it, the error to end the task with, once (then `.some(nil)`).
    private func countDecoded(_ data: Data, of inner: FoundationNetworking.URLSessionTask) -> Error?? {
        state.withLock { state -> Error?? in
            if state.decoded[inner.taskIdentifier]?.isOver == true { return .some(nil) }
            if state.decoded[inner.taskIdentifier] == nil {
                guard let count = DecodedBodyCount(of: inner.response) else { return nil }
                state.decoded[inner.taskIdentifier] = count
            }
            guard let failure = state.decoded[inner.taskIdentifier]?.add(data.count) else { return nil }
            let error = failure.urlError(failingURL: inner.response?.url?.absoluteString)
            state.failures[inner.taskIdentifier] = error
            return .some(error)
        }
    }

    /// Keeps `data` for one call at the end when the task prefers no incremental delivery,
    /// or already holds part of its body back (its bytes stay in order); false otherwise.
    private func holdBack(_ data: Data, of inner: FoundationNetworking.URLSessionTask, incremental: Bool) -> Bool {
        state.withLock { state in
            guard !incremental || state.wholeBodies[inner.taskIdentifier] != nil else { return false }
            state.wholeBodies[inner.taskIdentifier, default: Data()].append(data)
            return true
        }
    }

    func urlSession(_ s: FoundationNetworking.URLSession, dataTask inner: FoundationNetworking.URLSessionDataTask, willCacheResponse proposedResponse: CachedURLResponse, completionHandler: @escaping (CachedURLResponse?) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        if state.withLock({ $0.handlers[inner.taskIdentifier] != nil }) { return completionHandler(proposedResponse) }
        guard let (task, _) = ours(inner), let dataTask = task as? URLSessionDataTask, let delegate = dataDelegate(of: task) else { return completionHandler(proposedResponse) }
        ask(otherwise: { answer.value(proposedResponse) }) { session, back in
            delegate.urlSession(session, dataTask: dataTask, willCacheResponse: proposedResponse) { cached in back.give { answer.value(cached) } }
        }
    }

    func urlSession(_ s: FoundationNetworking.URLSession, task inner: FoundationNetworking.URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        guard let (task, delegate) = ours(inner) else { return }
        // Before the app hears of it, so that the task's progress says as much in the call.
        task.noteSent(totalBytesSent, of: totalBytesExpectedToSend)
        guard let delegate else { return }
        deliver { session in delegate.urlSession(session, task: task, didSendBodyData: bytesSent, totalBytesSent: totalBytesSent, totalBytesExpectedToSend: totalBytesExpectedToSend) }
    }

    func urlSession(_ s: FoundationNetworking.URLSession, task inner: FoundationNetworking.URLSessionTask, needNewBodyStream completionHandler: @escaping (InputStream?) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        guard let (task, delegate) = ours(inner), let delegate else { return completionHandler(nil) }
        ask(otherwise: { answer.value(nil) }) { session, back in
            delegate.urlSession(session, task: task, needNewBodyStream: { stream in
                let stream = UncheckedSendable(stream)
                back.give { answer.value(stream.value) }
            })
        }
    }

    // MARK: Redirects and challenges

    func urlSession(_ s: FoundationNetworking.URLSession, task inner: FoundationNetworking.URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        guard !followsRedirectsSilently, let (task, delegate) = ours(inner), let delegate else { return completionHandler(request) }
        ask(otherwise: { answer.value(request) }) { session, back in
            delegate.urlSession(session, task: task, willPerformHTTPRedirection: response, newRequest: request) { next in back.give { answer.value(next) } }
        }
    }

    func urlSession(_ s: FoundationNetworking.URLSession, task inner: FoundationNetworking.URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping (FoundationNetworking.URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        let stored = s.configuration.urlCredentialStorage?.defaultCredential(for: challenge.protectionSpace) != nil || challenge.proposedCredential != nil
        // Without a credential to try, corelibs would wait for ever; Apple's task ends with the
        // 401 or 407 as its response and no error: corelibs is told to cancel, and the task
        // ends on the response held back.
        let settle: @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void = { disposition, credential in
            let unanswered = !stored && credential == nil && (disposition == .performDefaultHandling || disposition == .rejectProtectionSpace)
            self.state.withLock { state in
                if unanswered { state.endedOnChallenge.insert(inner.taskIdentifier) } else { state.held[inner.taskIdentifier] = nil } // Apple shows no 401 it answered
            }
            answer.value(unanswered ? .cancelAuthenticationChallenge : Self.foundation(disposition), credential)
        }
        guard let (task, delegate) = ours(inner), let delegate else { return settle(.performDefaultHandling, nil) }
        ask(otherwise: { settle(.performDefaultHandling, nil) }) { session, back in
            delegate.urlSession(session, task: task, didReceive: challenge) { disposition, credential in back.give { settle(disposition, credential) } }
        }
    }

    func urlSession(_ s: FoundationNetworking.URLSession, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping (FoundationNetworking.URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let answer = UncheckedSendable(completionHandler)
        guard let delegate else { return completionHandler(.performDefaultHandling, nil) }
        ask(otherwise: { answer.value(.performDefaultHandling, nil) }) { session, back in
            delegate.urlSession(session, didReceive: challenge) { disposition, credential in back.give { answer.value(Self.foundation(disposition), credential) } }
        }
    }

    private static func foundation(_ disposition: URLSession.AuthChallengeDisposition) -> FoundationNetworking.URLSession.AuthChallengeDisposition {
        FoundationNetworking.URLSession.AuthChallengeDisposition(rawValue: disposition.rawValue) ?? .performDefaultHandling
    }

    // MARK: The end

    func urlSession(_ s: FoundationNetworking.URLSession, task inner: FoundationNetworking.URLSessionTask, didFinishCollecting metrics: FoundationNetworking.URLSessionTaskMetrics) {
        deliverHeld(of: inner, s)
        guard let (task, delegate) = ours(inner), let delegate else { return }
        let ours = URLSessionTaskMetrics(transactionMetrics: metrics.transactionMetrics.map {
            URLSessionTaskTransactionMetrics(request: $0.request, response: $0.response, networkProtocolName: $0.networkProtocolName, responseEndDate: $0.responseEndDate)
        }, taskInterval: metrics.taskInterval, redirectCount: metrics.redirectCount)
        let call: @Sendable (URLSession) -> Void = { session in delegate.urlSession(session, task: task, didFinishCollecting: ours) }
        // Apple hands a download's metrics after didFinishDownloadingTo, which comes with didCompleteWithError.
        if state.withLock({ state in state.downloads[inner.taskIdentifier].map { $0.metrics = call } != nil }) { return }
        deliver(call)
    }

    func urlSession(_ s: FoundationNetworking.URLSession, task inner: FoundationNetworking.URLSessionTask, didCompleteWithError reported: Error?) {
        let error = ForegroundErrors.apples(reported)
        deliverHeld(of: inner, s)
        if let gathered = state.withLock({ $0.handlers.removeValue(forKey: inner.taskIdentifier) }) {
            // A body cut off (its decoder's bound) is not handed over; the handler hears why.
            let cutOff = state.withLock { state in
                state.decoded[inner.taskIdentifier]?.isOver == true ? state.failures[inner.taskIdentifier] : nil
            }
            if let failure = cutOff {
                _ = state.withLock { $0.decoded.removeValue(forKey: inner.taskIdentifier) }
                return gathered.handler(nil, inner.response, failure)
            }
            return gathered.handler(gathered.body, inner.response, error) // it forgets the task and completes ours
        }
        guard let (task, delegate) = ours(inner) else { return }
        let outcome = forget(inner)
        // A body held back for one call comes before the end, whatever the end is, as its
        // pieces would have.
        if let body = outcome.wholeBody, let dataTask = task as? URLSessionDataTask, let delegate = dataDelegate(of: task) {
            deliver { session in delegate.urlSession(session, dataTask: dataTask, didReceive: body) }
        }
        if let download = outcome.download {
            finishDownload(download, error: outcome.failure ?? error)
            if let metrics = download.metrics { deliver(metrics) }
        }
        complete(task, with: outcome.endedOnChallenge ? nil : outcome.failure ?? error, delegate: delegate)
    }

    /// The task ends on a held 401 or 407 (no challenge, or one left to default handling):
    /// the app gets it now, as the task's response, with its body.
    private func deliverHeld(of inner: FoundationNetworking.URLSessionTask, _ s: FoundationNetworking.URLSession) {
        guard let dataTask = inner as? FoundationNetworking.URLSessionDataTask,
              let held = state.withLock({ $0.held.removeValue(forKey: inner.taskIdentifier) }) else { return }
        forward(held.response, of: dataTask) { _ in } // corelibs is past asking
        for data in held.data { urlSession(s, dataTask: dataTask, didReceive: data) }
    }

    /// Ends `task` with `error` (also for tasks with a completion handler, which
    /// FoundationNetworking does not report here), then tells the session it is gone.
    func complete(_ task: URLSessionTask, with error: Error?, delegate: URLSessionTaskDelegate?, savingCookies: Bool = true) {
        if savingCookies { cookies?.save(from: task.response?.url) } // before the delegate hears of the end
        task.finish(with: error)
        task.setState(.completed)
        let finished = self.finished
        guard let delegate else { return finished(task) }
        deliver(otherwise: { finished(task) }) { session in
            delegate.urlSession(session, task: task, didCompleteWithError: error)
            finished(task)
        }
    }

    /// Ends `inner` with `error` instead of the -999 its cancellation reports.
    func fail(_ inner: FoundationNetworking.URLSessionTask, with error: Error) {
        state.withLock { $0.failures[inner.taskIdentifier] = error }
        inner.cancel()
    }

    /// A task made with a completion handler has ended: no delegate call will say so.
    /// Also when it ends: the error that replaces corelibs', whether it ended on a 401 or 407
    /// no credential answered (without an error, then), and a body held back for one call.
    func forget(_ inner: FoundationNetworking.URLSessionTask) -> (failure: Error?, endedOnChallenge: Bool, download: ForegroundDownloadFile?, wholeBody: Data?) {
        state.withLock { state in
            state.tasks[inner.taskIdentifier] = nil
            state.decoded[inner.taskIdentifier] = nil
            return (state.failures.removeValue(forKey: inner.taskIdentifier), state.endedOnChallenge.remove(inner.taskIdentifier) != nil,
                    state.downloads.removeValue(forKey: inner.taskIdentifier), state.wholeBodies.removeValue(forKey: inner.taskIdentifier))
        }
    }

    // MARK: A data task that became a download

    /// Writes a piece of the body of a data task that became a download and tells the app
    /// (`didWriteData`); a write that fails ends the task with -3003.
    private func write(_ data: Data, to download: ForegroundDownloadFile, of inner: FoundationNetworking.URLSessionDataTask) {
        do {
            try download.write(data)
        } catch {
            return fail(inner, with: error)
        }
        guard let delegate = download.task.delegate as? URLSessionDownloadDelegate ?? delegate as? URLSessionDownloadDelegate else { return }
        let (task, count, written, expected) = (download.task, Int64(data.count), download.written, download.expected)
        deliver { session in delegate.urlSession(session, downloadTask: task, didWriteData: count, totalBytesWritten: written, totalBytesExpectedToWrite: expected) }
    }

    /// The download's file goes to `didFinishDownloadingTo` when the task succeeded, and
    /// exists only during that call, as Apple's do.
    private func finishDownload(_ download: ForegroundDownloadFile, error: Error?) {
        download.close()
        guard error == nil, let delegate = download.task.delegate as? URLSessionDownloadDelegate ?? delegate as? URLSessionDownloadDelegate else { return download.remove() }
        let task = download.task
        deliver(otherwise: { download.remove() }) { session in
            delegate.urlSession(session, downloadTask: task, didFinishDownloadingTo: download.location)
            download.remove()
        }
    }
}
