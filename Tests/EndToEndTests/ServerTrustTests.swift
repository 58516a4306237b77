import Foundation
import TestPeers
import Testing
import BackgroundTransfer
import TransferPOSIX

/// Server trust in a default (in-process) session against nginx with certificates from a
/// private CA (S2.6, S3.6): Apple's codes with the failing URL and the peer's chain in
/// `userInfo`, and the session delegate's server-trust challenge — accept (pinned), default
/// handling, cancel.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ServerTrustTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }
    let certificates: TestCertificates
    let nginx: Nginx
    let payload: Data

    required init() throws {
        let certificates = try TestCertificates.shared.get()
        self.certificates = certificates
        nginx = try Nginx.start(sites: certificates.sites(TestCertificates.Kind.allCases))
        payload = try nginx.serve("file.bin", bytes: 200_000)
        try super.init()
    }

    deinit { nginx.stop() }

    /// Answers server-trust challenges the way `answer` says, with Apple's code, and records them.
    final class TrustDelegate: URLSessionDownloadDelegate, @unchecked Sendable {
        struct Outcome {
            var error: URLError?
            var delivered: Data?
            /// What `didFinishCollecting` handed over, before `didCompleteWithError`.
            var metrics: URLSessionTaskMetrics?
        }
        let answer: @Sendable (SecTrust) -> URLSession.AuthChallengeDisposition
        private let lock = NSCondition()
        private(set) var trusts: [SecTrust] = []
        private var outcomes: [Int: Outcome] = [:]
        private var delivered: [Int: Data] = [:]
        private var metrics: [Int: URLSessionTaskMetrics] = [:]

        init(answer: @escaping @Sendable (SecTrust) -> URLSession.AuthChallengeDisposition) {
            self.answer = answer
        }

        func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
            if challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust, let trust = challenge.protectionSpace.serverTrust {
                lock.lock(); trusts.append(trust); lock.unlock()
                let disposition = answer(trust)
                completionHandler(disposition, disposition == .useCredential ? URLCredential(trust: trust) : nil)
            } else {
                completionHandler(.performDefaultHandling, nil)
            }
        }

        func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
            let data = try? Data(contentsOf: location)
            lock.lock(); delivered[downloadTask.taskIdentifier] = data; lock.unlock()
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
            lock.lock(); self.metrics[task.taskIdentifier] = metrics; lock.unlock()
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            lock.lock()
            outcomes[task.taskIdentifier] = Outcome(error: error as? URLError, delivered: delivered[task.taskIdentifier], metrics: metrics[task.taskIdentifier])
            lock.broadcast()
            lock.unlock()
        }

        func outcome(of task: Int, timeout: TimeInterval = 20) -> Outcome? {
            let deadline = Date() + timeout
            lock.lock()
            defer { lock.unlock() }
            while outcomes[task] == nil { if !lock.wait(until: deadline) { break } }
            return outcomes[task]
        }
    }

    private func download(_ kind: TestCertificates.Kind, dataTask: Bool = false, answer: @escaping @Sendable (SecTrust) -> URLSession.AuthChallengeDisposition) throws -> (TrustDelegate.Outcome, TrustDelegate) {
        let delegate = TrustDelegate(answer: answer)
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let url = try #require(URL(string: nginx.url(kind.rawValue, "file.bin")))
        let task: URLSessionTask = dataTask ? session.dataTask(with: url) : session.downloadTask(with: url)
        task.resume()
        return (try #require(delegate.outcome(of: task.taskIdentifier)), delegate)
    }

    @Test("Default handling: a chain from a private CA fails with -1202, the failing URL and the peer's chain, and no file", arguments: [TestCertificates.Kind.trusted, .expired, .notYetValid, .selfSigned, .wrongHost])
    func defaultHandling(kind: TestCertificates.Kind) throws {
        let (outcome, delegate) = try download(kind) { _ in .performDefaultHandling }
        #expect(outcome.delivered == nil)
        let error = try #require(outcome.error)
        // Without the test CA in the store, every chain of the CA is of an unknown issuer.
        let expected = kind == .selfSigned ? -1203 : (kind == .expired || kind == .notYetValid || kind == .wrongHost || kind == .trusted ? -1202 : 0)
        #expect(error.errorCode == expected, "\(error)")
        #expect(error.userInfo["NSErrorFailingURLStringKey"] as? String == nginx.url(kind.rawValue, "file.bin"))
        let trust = try #require(error.userInfo[NSURLErrorFailingURLPeerTrustErrorKey] as? SecTrust)
        #expect(trust.certificateChain.first == certificates.der(kind))
        #expect(delegate.trusts.count == 1)
        #expect(delegate.trusts.first?.isTrustedByDefault == false)
        #expect(!nginx.requests.contains { $0.port == nginx.port(kind.rawValue) }, "no request reaches a server nobody trusts")
    }

    @Test("The delegate accepts a self-signed chain with URLCredential(trust:): the file arrives over h2, pinned to that key")
    func acceptedByTheDelegate() throws {
        let (outcome, delegate) = try download(.selfSigned) { trust in
            trust.certificateChain.first == TestCertificates.sharedDER(.selfSigned) ? .useCredential : .cancelAuthenticationChallenge
        }
        #expect(outcome.error == nil, "\(String(describing: outcome.error))")
        #expect(outcome.delivered == payload)
        #expect(delegate.trusts.count == 1)
        #expect(nginx.requests.last?.protocolName == "HTTP/2.0")
        #expect(outcome.metrics?.transactionMetrics.last?.networkProtocolName == "h2", "metrics before the completion: \(String(describing: outcome.metrics))")
    }

    @Test("Apple's pinning code compiles as written (CFError, CFArray, CFData) and accepts the chain whose leaf it knows")
    func applesPinningCode() throws {
        let pinned = try #require(TestCertificates.sharedDER(.selfSigned))
        let (outcome, _) = try download(.selfSigned) { serverTrust in
            // As Apple's "Performing manual server trust authentication" writes it.
            var error: CFError?
            let trusted = SecTrustEvaluateWithError(serverTrust, &error)
            guard let chain = SecTrustCopyCertificateChain(serverTrust) as? [SecCertificate], let leaf = chain.first else { return .cancelAuthenticationChallenge }
            let leafData = SecCertificateCopyData(leaf) as Data
            return !trusted && error != nil && leafData == pinned ? .useCredential : .cancelAuthenticationChallenge
        }
        #expect(outcome.error == nil, "\(String(describing: outcome.error))")
        #expect(outcome.delivered == payload)
    }

    @Test("A default session's data task asks the server-trust challenge too: cancelled, -999; accepted for a chain the system does not trust, -1202 (FoundationNetworking carries it out); without a delegate, Apple's code for the chain; no request in any case")
    func dataTaskTrust() throws {
        let (cancelled, asked) = try download(.selfSigned, dataTask: true) { _ in .cancelAuthenticationChallenge }
        #expect(cancelled.error?.errorCode == -999, "\(String(describing: cancelled.error))")
        #expect(asked.trusts.count == 1)
        let (accepted, _) = try download(.selfSigned, dataTask: true) { _ in .useCredential }
        #expect(accepted.error?.errorCode == -1202, "\(String(describing: accepted.error))")
        // Without a delegate: Apple's code for the chain (corelibs would say -1).
        let plain = URLSession(configuration: .default)
        defer { plain.invalidateAndCancel() }
        let failed = Locked<Int?>(nil)
        plain.dataTask(with: try #require(URL(string: nginx.url(TestCertificates.Kind.selfSigned.rawValue, "file.bin")))) { _, _, error in
            failed.withLock { $0 = (error as? URLError)?.errorCode ?? 0 }
        }.resume()
        #expect(waitUntil(timeout: 20) { failed.withLock { $0 } != nil })
        #expect(failed.withLock { $0 } == -1203)
        #expect(nginx.requests.isEmpty)
    }

    @Test("Cancelling the server-trust challenge ends the task with -999 and sends no request")
    func cancelled() throws {
        let (outcome, _) = try download(.selfSigned) { _ in .cancelAuthenticationChallenge }
        #expect(outcome.error?.errorCode == -999)
        #expect(outcome.delivered == nil)
        #expect(nginx.requests.isEmpty)
    }
}
}

/// Server trust in a background session: the daemon probes the chain, holds the task and
/// asks the attached app's session delegate (S3.6); the answer decides, as in a default session.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class BackgroundServerTrustTests: InProcessSuite, @unchecked Sendable {
    let certificates: TestCertificates
    let nginx: Nginx
    let payload: Data

    required init() throws {
        let certificates = try TestCertificates.shared.get()
        self.certificates = certificates
        nginx = try Nginx.start(sites: certificates.sites([.selfSigned, .otherCA]))
        payload = try nginx.serve("file.bin", bytes: 300_000)
        try super.init()
    }

    deinit { nginx.stop() }

    private func download(_ kind: TestCertificates.Kind, session name: String, answer: @escaping @Sendable (SecTrust) -> URLSession.AuthChallengeDisposition) throws -> (ServerTrustTests.TrustDelegate.Outcome, ServerTrustTests.TrustDelegate) {
        let delegate = ServerTrustTests.TrustDelegate(answer: answer)
        let configuration = URLSessionConfiguration.background(withIdentifier: name)
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let task = session.downloadTask(with: try #require(URL(string: nginx.url(kind.rawValue, "file.bin"))))
        task.resume()
        return (try #require(delegate.outcome(of: task.taskIdentifier, timeout: 40)), delegate)
    }

    @Test("Default handling in a background session: -1202 with the failing URL and the peer's chain, no file, no request")
    func defaultHandling() throws {
        let (outcome, delegate) = try download(.otherCA, session: "trust.default") { _ in .performDefaultHandling }
        #expect(outcome.delivered == nil)
        let error = try #require(outcome.error)
        #expect(error.errorCode == -1202, "\(error)")
        #expect(error.userInfo["NSErrorFailingURLStringKey"] as? String == nginx.url("otherCA", "file.bin"))
        let trust = try #require(error.userInfo[NSURLErrorFailingURLPeerTrustErrorKey] as? SecTrust)
        #expect(trust.certificateChain.first == certificates.der(.otherCA))
        #expect(delegate.trusts.count == 1 && delegate.trusts.first?.isTrustedByDefault == false)
        #expect(nginx.requests.isEmpty, "no request reaches a server nobody trusts")
    }

    @Test("Accepted with URLCredential(trust:) in a background session: the daemon downloads from that key over HTTP/2, one request")
    func accepted() throws {
        let (outcome, delegate) = try download(.selfSigned, session: "trust.accepted") { trust in
            trust.certificateChain.first == TestCertificates.sharedDER(.selfSigned) ? .useCredential : .cancelAuthenticationChallenge
        }
        #expect(outcome.error == nil, "\(String(describing: outcome.error))")
        #expect(outcome.delivered == payload)
        #expect(delegate.trusts.count == 1)
        let requests = nginx.requests
        #expect(requests.count == 1 && requests.first?.protocolName == "HTTP/2.0", "\(requests)")
        let metrics = try #require(outcome.metrics, "didFinishCollecting before didCompleteWithError")
        #expect(metrics.transactionMetrics.last?.networkProtocolName == "h2")
        #expect(metrics.transactionMetrics.last?.request?.url?.absoluteString == nginx.url("selfSigned", "file.bin"))
        #expect(metrics.taskInterval.duration >= 0 && metrics.taskInterval.duration < 60)
    }

    @Test("Three downloads to one untrusted server in one session: the chain is probed once, one acceptance covers them all, and each file arrives")
    func oneAnswerForAServer() throws {
        let delegate = ServerTrustTests.TrustDelegate { _ in .useCredential }
        let configuration = URLSessionConfiguration.background(withIdentifier: "trust.three")
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let url = try #require(URL(string: nginx.url("selfSigned", "file.bin")))
        let tasks = (0..<3).map { _ in session.downloadTask(with: url) }
        tasks.forEach { $0.resume() }
        for task in tasks {
            let outcome = try #require(delegate.outcome(of: task.taskIdentifier, timeout: 40))
            #expect(outcome.error == nil && outcome.delivered == payload, "\(String(describing: outcome.error))")
        }
        #expect(nginx.requests.filter { $0.status == 200 }.count == 3)
        let probes = container.logEntries(process: "transferd", category: "trust").filter { $0.message.contains("looking at the server's chain") }
        #expect(!probes.isEmpty && probes.count <= 3)
    }

    @Test("Cancelled in a background session: -999, no file, no request")
    func cancelled() throws {
        let (outcome, _) = try download(.selfSigned, session: "trust.cancelled") { _ in .cancelAuthenticationChallenge }
        #expect(outcome.error?.errorCode == -999)
        #expect(outcome.delivered == nil)
        #expect(nginx.requests.isEmpty)
    }

    @Test("An app's own anchors judge the chain offline (SecTrustSetAnchorCertificates): the test CA trusts its server, not a self-signed one")
    func anchorsOfTheApp() throws {
        let ca = try #require(SecCertificateCreateWithData(nil, certificates.caDER))
        #expect(SecCertificateCreateWithData(nil, Data("not a certificate".utf8)) == nil)
        let statuses = Locked<[OSStatus]>([])
        let (_, delegate) = try download(.otherCA, session: "trust.anchors") { trust in
            // As Apple's code writes it: a CFArray of anchors, a CFError.
            let refused = SecTrustSetAnchorCertificates(trust, ["not a certificate"] as CFArray)
            let taken = SecTrustSetAnchorCertificates(trust, [ca] as CFArray)
            statuses.withLock { $0 = [refused, taken] }
            var error: CFError?
            // Signed by another CA: the test CA's anchor does not make it trusted.
            return SecTrustEvaluateWithError(trust, &error) ? .useCredential : .cancelAuthenticationChallenge
        }
        #expect(delegate.trusts.count == 1)
        #expect(statuses.withLock { $0 } == [errSecParam, errSecSuccess])
        #expect(nginx.requests.isEmpty)
    }
}
}

extension TestCertificates {
    /// The DER of one of the shared certificates, nil when they could not be made.
    static func sharedDER(_ kind: Kind) -> Data? {
        (try? shared.get())?.der(kind)
    }
}
