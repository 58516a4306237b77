import Foundation
import TestPeers
import Testing
import BackgroundTransfer
import TransferContainer

/// What an accepted server key covers in a background session (S3.6): the origin it was
/// accepted for (host and port: only https uses a key), not another origin of the same session, even one that
/// presents the very same key (the test certificates signed by a CA share one leaf key, on
/// purpose).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(2)))
final class ServerTrustScopeTests: InProcessSuite, @unchecked Sendable {
    let certificates: TestCertificates
    /// Origin A presents the other-CA chain; origin B an expired chain of the test CA, which
    /// the device does not trust either. Same leaf key.
    let nginx: Nginx
    let payload: Data

    required init() throws {
        let certificates = try TestCertificates.shared.get()
        self.certificates = certificates
        nginx = try Nginx.start(sites: certificates.sites([.otherCA, .expired]))
        payload = try nginx.serve("file.bin", bytes: 200_000)
        try super.init()
    }

    deinit { nginx.stop() }

    /// A session whose delegate accepts only origin A's chain and cancels any other challenge.
    private func session(_ name: String) throws -> (URLSession, ServerTrustTests.TrustDelegate) {
        #expect(certificates.keyFile(.otherCA) == certificates.keyFile(.expired), "both origins present one key")
        let accepted = try #require(certificates.der(.otherCA))
        let delegate = ServerTrustTests.TrustDelegate { trust in trust.certificateChain.first == accepted ? .useCredential : .cancelAuthenticationChallenge }
        let configuration = URLSessionConfiguration.background(withIdentifier: name)
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        return (URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil), delegate)
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
}
}
