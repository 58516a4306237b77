import Foundation
import TestPeers
import Testing
import BackgroundTransfer
import ContainerInspection

/// A balancer in front of two backends, one presenting a chain nobody trusts and one a chain of
/// the device's installed CA: every transfer meets the first and every trust probe the second.
/// The daemon must back off between such disagreements and end the task with -1202, not
/// hand-shake in a tight loop for ever.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ServerTrustDisagreementTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }
    let nginx: Nginx
    let balancer: ForwardProxy
    var daemon: DaemonUnderTest?

    required init() throws {
        let certificates = try TestCertificates.shared.get()
        nginx = try Nginx.start(sites: certificates.sites([.otherCA, .trusted]))
        _ = try nginx.serve("file.bin", bytes: 100_000)
        // Connection 1 (the transfer) meets the untrusted backend, connection 2 (the probe) the trusted one, and so on.
        balancer = try ForwardProxy(balancing: [nginx.port("otherCA"), nginx.port("trusted")])
        try super.init()
        // Both ways: the option for this daemon, whoever runs the tests; the container's file
        // (root-owned when the tests run as root) for a daemon a client starts on demand.
        try FileManager.default.copyItem(at: certificates.caFile, to: container.layout.deviceTrustedRoots)
        daemon = try DaemonUnderTest.start(container, trustedRoots: certificates.caFile)
    }

    /// A background session of the test app whose delegate cancels any trust question, and a
    /// download (not resumed) through the balancer.
    func downloadThroughBalancer(session identifier: String) throws -> (URLSession, ServerTrustTests.TrustDelegate, URLSessionDownloadTask, String) {
        let delegate = ServerTrustTests.TrustDelegate { _ in .cancelAuthenticationChallenge }
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        let url = "https://127.0.0.1:\(balancer.port)/file.bin"
        return (session, delegate, session.downloadTask(with: try #require(URL(string: url))), url)
    }

    deinit {
        balancer.stop()
        nginx.stop()
    }

    @Test("A server whose transfers fail trust while its probes verify: few handshakes, backed off, and the task ends with -1202 naming the URL")
    func alternatingChain() throws {
        let (session, delegate, task, url) = try downloadThroughBalancer(session: "trust.disagreement")
        defer { session.invalidateAndCancel() }
        let started = Date()
        task.resume()
        let outcome = delegate.outcome(of: task.taskIdentifier, timeout: 30)
        let connections = balancer.events.count
        #expect(outcome != nil, "the task did not end in 30 s (\(connections) connections)")
        #expect(outcome?.error?.errorCode == -1202, "\(String(describing: outcome?.error))")
        #expect(outcome?.error?.failingURL?.absoluteString == url)
        #expect(delegate.trusts.isEmpty, "the probe's chain verifies: the app is not asked")
        #expect(connections <= 20, "\(connections) connections in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    @Test("""
        The bound on disagreements holds across a daemon restart: killed after four, the restarted daemon \
        fails the task with -1202 after one more
        """, .enabled(if: getuid() == 0, "the library restarts the daemon on demand: it trusts a root-owned file only"))
    func disagreementsSurviveRestart() throws {
        let (session, delegate, task, _) = try downloadThroughBalancer(session: "trust.disagreement.restart")
        defer { session.invalidateAndCancel() }
        task.resume()
        // Each disagreement is two connections: the transfer's (untrusted) and the probe's,
        // and one retry in the task's record; killed while the fourth's backoff (2 s) runs.
        let retries = { ContainerSnapshot.read(self.container.layout).sessions.flatMap(\.tasks).first { $0.taskIdentifier == task.taskIdentifier }?.retryCount ?? 0 }
        try #require(waitUntil(timeout: 30) { retries() >= 4 }, "four disagreements (\(retries()) retries, \(balancer.events.count) connections)")
        let before = balancer.events.count
        let killed = try #require(daemon)
        killed.process.kill()
        _ = killed.process.wait(timeout: 10)
        daemon = try DaemonUnderTest.start(container, trustedRoots: TestCertificates.shared.get().caFile)
        let outcome = delegate.outcome(of: task.taskIdentifier, timeout: 40)
        let after = balancer.events.count - before
        #expect(outcome?.error?.errorCode == -1202, "\(String(describing: outcome?.error))")
        #expect(after <= 4, "\(after) connections after the restart (one more disagreement is two)")
    }
}
}
