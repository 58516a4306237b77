import Foundation
import TestPeers
import Testing
import BackgroundTransfer

/// What an accepted server key covers in a background session (S3.6): the origin it was
/// accepted for (scheme, host and port), not another origin of the same session, even one that
/// presents the very same key (the test certificates signed by a CA share one leaf key, on
/// purpose), and not a server a redirect leads to.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ServerTrustScopeTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }
    let certificates: TestCertificates
    /// Origin A presents the other-CA chain; origin B an expired chain of the test CA, which the
    /// device trusts (its root is installed) but not expired. Same leaf key. A third site
    /// presents a valid chain of the test CA.
    let nginx: Nginx
    let payload: Data

    required init() throws {
        let certificates = try TestCertificates.shared.get()
        self.certificates = certificates
        nginx = try Nginx.start(sites: certificates.sites([.otherCA, .expired, .trusted]))
        payload = try nginx.serve("file.bin", bytes: 200_000)
        try super.init()
        _ = try DaemonUnderTest.start(container, trustedRoots: certificates.caFile)
    }

    deinit { nginx.stop() }

    /// A session whose delegate accepts only origin A's chain and cancels any other challenge
    /// (or, `acceptingAll`, accepts every chain).
    private func session(_ name: String, acceptingAll: Bool = false) throws -> (URLSession, ServerTrustTests.TrustDelegate) {
        #expect(certificates.keyFile(.otherCA) == certificates.keyFile(.expired), "both origins present one key")
        let accepted = try #require(certificates.der(.otherCA))
        let delegate = ServerTrustTests.TrustDelegate { trust in acceptingAll || trust.certificateChain.first == accepted ? .useCredential : .cancelAuthenticationChallenge }
        let configuration = URLSessionConfiguration.background(withIdentifier: name)
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        return (URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil), delegate)
    }

    /// Another nginx (site "hop") presenting `kind`'s chain, whose `/hop` redirects to `target`.
    private func redirector(presenting kind: TestCertificates.Kind, to target: String, directives: String = "") throws -> Nginx {
        try Nginx.start(sites: [Nginx.Site(name: "hop", certificate: certificates.certificateFile(kind), key: certificates.keyFile(kind),
                                           directives: "location = /hop { return 302 \(target); } \(directives)")])
    }

    /// Downloads `url` in `session` and waits for its completion.
    private func download(_ url: String, in session: URLSession, _ delegate: ServerTrustTests.TrustDelegate) throws -> ServerTrustTests.TrustDelegate.Outcome {
        let task = session.downloadTask(with: try #require(URL(string: url)))
        task.resume()
        return try #require(delegate.outcome(of: task.taskIdentifier, timeout: 40), "\(url) did not complete")
    }

    @Test("A key accepted for origin A is not trusted for origin B of the same session, which presents the same key: B is asked about, and cancelled, sends no request")
    func sameKeyOnAnotherOrigin() throws {
        let (session, delegate) = try session("trust.scope.origin")
        defer { session.finishTasksAndInvalidate() }
        let first = try download(nginx.url("otherCA", "file.bin"), in: session, delegate)
        #expect(first.error == nil && first.delivered == payload, "origin A, accepted: \(String(describing: first.error))")

        let second = try download(nginx.url("expired", "file.bin"), in: session, delegate)
        #expect(second.error?.errorCode == -999, "origin B is cancelled by the app, not trusted by A's acceptance: \(String(describing: second.error))")
        #expect(second.delivered == nil)
        #expect(delegate.trusts.map { $0.certificateChain.first } == [certificates.der(.otherCA), certificates.der(.expired)], "one challenge per origin")
        #expect(!nginx.requests.contains { $0.port == nginx.port("expired") }, "no request reaches origin B")
    }

    @Test("""
        A key accepted for 127.0.0.1 does not cover localhost on the same scheme and port (the same \
        server): localhost is asked about, and cancelled, sends no request
        """)
    func sameKeyOnAnotherHostName() throws {
        // The app accepts the first challenge only: both names present the same chain, so a
        // delegate judging by the chain would accept localhost's too.
        final class FirstOnly: @unchecked Sendable {
            private let lock = NSLock()
            private var answered = false
            func take() -> Bool { lock.withLock { defer { answered = true }; return !answered } }
        }
        let first = FirstOnly()
        let delegate = ServerTrustTests.TrustDelegate { _ in
            first.take() ? .useCredential : .cancelAuthenticationChallenge
        }
        let configuration = URLSessionConfiguration.background(withIdentifier: "trust.scope.host")
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let accepted = try download(nginx.url("otherCA", "file.bin"), in: session, delegate)
        #expect(accepted.error == nil && accepted.delivered == payload,
                "127.0.0.1, accepted: \(String(describing: accepted.error))")
        let port = nginx.port("otherCA")
        let requests = nginx.requests.filter { $0.port == port }.count

        let byName = "https://localhost:\(port)/file.bin"
        let second = try download(byName, in: session, delegate)
        #expect(second.error?.errorCode == -999,
                "localhost is cancelled, not trusted under 127.0.0.1's key: \(String(describing: second.error))")
        #expect(second.delivered == nil)
        #expect(delegate.trusts.count == 2, "one challenge per host: \(delegate.trusts.count)")
        #expect(nginx.requests.filter { $0.port == port }.count == requests, "no request by the name localhost")
    }

    @Test("A redirect from an accepted origin to another origin with the same key asks about that origin too; cancelled, it gets no request. A redirect within the origin is followed under the key")
    func redirectToAnotherOrigin() throws {
        let hop = try redirector(presenting: .otherCA, to: nginx.url("expired", "file.bin"), directives: "location = /same { return 302 /file.bin; }")
        defer { hop.stop() }
        let hopPayload = try hop.serve("file.bin", bytes: 100_000, seed: 2)
        let (session, delegate) = try session("trust.scope.redirect")
        defer { session.finishTasksAndInvalidate() }
        let first = try download(hop.url("hop", "same"), in: session, delegate)
        #expect(first.error == nil && first.delivered == hopPayload, "origin A, accepted, redirected within itself: \(String(describing: first.error))")

        let redirected = try download(hop.url("hop", "hop"), in: session, delegate)
        #expect(redirected.error?.errorCode == -999, "the redirect's target is asked about and cancelled: \(String(describing: redirected.error))")
        #expect(redirected.delivered == nil)
        #expect(delegate.trusts.count == 2 && delegate.trusts.last?.certificateChain.first == certificates.der(.expired), "one challenge per origin: \(delegate.trusts.map { $0.certificateChain.first?.count ?? 0 })")
        #expect(!nginx.requests.contains { $0.port == nginx.port("expired") }, "no request reaches the redirect's target")
    }

    @Test("A redirect from an accepted origin to another origin with the same key, both accepted: two challenges, and the file arrives from the redirect's target")
    func redirectToAnotherOriginAccepted() throws {
        let hop = try redirector(presenting: .otherCA, to: nginx.url("expired", "file.bin"))
        defer { hop.stop() }
        let (session, delegate) = try session("trust.scope.redirect-accepted", acceptingAll: true)
        defer { session.finishTasksAndInvalidate() }
        let redirected = try download(hop.url("hop", "hop"), in: session, delegate)
        #expect(redirected.error == nil && redirected.delivered == payload, "\(String(describing: redirected.error))")
        #expect(delegate.trusts.map { $0.certificateChain.first } == [certificates.der(.otherCA), certificates.der(.expired)], "one challenge per origin")
        #expect(nginx.requests.filter { $0.port == nginx.port("expired") }.map(\.status) == [200], "one request reaches the target, once accepted")
    }

    @Test("A redirect from a server the device trusts to one it does not: the app is asked about the target's chain (not the first server's), and accepting it brings the file")
    func redirectFromTrustedToUntrusted() throws {
        let hop = try redirector(presenting: .trusted, to: nginx.url("otherCA", "file.bin"))
        defer { hop.stop() }
        let (session, delegate) = try session("trust.scope.from-trusted")
        defer { session.finishTasksAndInvalidate() }
        let redirected = try download(hop.url("hop", "hop"), in: session, delegate)
        #expect(redirected.error == nil && redirected.delivered == payload, "\(String(describing: redirected.error))")
        #expect(delegate.trusts.map { $0.certificateChain.first } == [certificates.der(.otherCA)], "one challenge, for the target")
    }

    @Test("A default session does not follow a redirect to another origin under a key accepted for the first: -1202 naming the target, with its chain, and no request reaches it")
    func defaultSessionRedirectToAnotherOrigin() throws {
        let hop = try redirector(presenting: .otherCA, to: nginx.url("expired", "file.bin"))
        defer { hop.stop() }
        let delegate = ServerTrustTests.TrustDelegate { _ in .useCredential }
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let redirected = try download(hop.url("hop", "hop"), in: session, delegate)
        let error = try #require(redirected.error, "the redirect was followed under the key accepted for the first origin")
        #expect(error.errorCode == -1202, "\(error)")
        #expect(error.userInfo["NSErrorFailingURLStringKey"] as? String == nginx.url("expired", "file.bin"))
        #expect((error.userInfo[NSURLErrorFailingURLPeerTrustErrorKey] as? SecTrust)?.certificateChain.first == certificates.der(.expired), "the target's chain")
        #expect(redirected.delivered == nil)
        #expect(!nginx.requests.contains { $0.port == nginx.port("expired") }, "no request reaches the redirect's target")
    }
}
}
