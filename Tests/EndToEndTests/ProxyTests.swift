import Foundation
import TestPeers
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests

/// Proxies from `connectionProxyDictionary` (issue 20): https URLs go through the HTTPS proxy
/// in a `CONNECT` tunnel, http URLs through the HTTP proxy as forwarded requests; a `407` to
/// the `CONNECT` asks the app for the proxy's credential (S3.1); and the handshake-only probe
/// that learns an untrusted chain goes through the same proxy. nginx holds a chain from the
/// test CA, which the device trusts (the daemon is started with `--trusted-roots` naming it).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ProxyTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }
    let nginx: Nginx
    let payload: Data

    required init() throws {
        let certificates = try TestCertificates.shared.get()
        nginx = try Nginx.start(sites: [TestCertificates.Kind.trusted, .otherCA].map { kind in
            Nginx.Site(name: kind.rawValue, certificate: certificates.certificateFile(kind), key: certificates.keyFile(kind))
        })
        payload = try nginx.serve("file.bin", bytes: 300_000)
        try super.init()
        _ = try DaemonUnderTest.start(container, trustedRoots: certificates.caFile)
    }

    deinit { nginx.stop() }

    private func httpsProxy(_ proxy: ForwardProxy) -> [AnyHashable: Any] {
        ["HTTPSEnable": 1, "HTTPSProxy": "127.0.0.1", "HTTPSPort": proxy.port]
    }

    private func completed(_ task: URLSessionTask, code: Int? = nil, status: Int? = 200) -> (RecordingDelegate.Call) -> Bool {
        { call in if case .completed(task.taskIdentifier, code, status) = call { return true } else { return false } }
    }

    @Test("An https download goes through the HTTPS proxy in a CONNECT tunnel and arrives whole")
    func httpsThroughConnectTunnel() async throws {
        try await onOwnThread { [self] in
            let proxy = try ForwardProxy()
            defer { proxy.stop() }
            let delegate = RecordingDelegate()
            let session = fixture.session("tunnel", delegate: delegate) { $0.connectionProxyDictionary = self.httpsProxy(proxy) }
            let url = nginx.url("trusted", "file.bin")
            let task = session.downloadTask(with: URL(string: url)!)
            task.resume()
            #expect(delegate.wait(timeout: 30, for: completed(task)), "\(delegate.calls)")
            #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
            #expect(proxy.tunnels == ["127.0.0.1:\(nginx.port("trusted"))"], "\(proxy.events)")
            #expect(nginx.requests.count == 1)
            session.invalidateAndCancel()
        }
    }

    @Test("An http download goes through the HTTP proxy as a forwarded request; the HTTPS keys alone leave it direct")
    func httpThroughForwardProxy() async throws {
        try await onOwnThread { [self] in
            let proxy = try ForwardProxy()
            defer { proxy.stop() }
            let data = testPayload(size: 200_000, seed: 9)
            server.serve("/plain.bin", data: data)
            let delegate = RecordingDelegate()
            let session = fixture.session("forward", delegate: delegate) {
                $0.connectionProxyDictionary = ["HTTPEnable": 1, "HTTPProxy": "127.0.0.1", "HTTPPort": proxy.port]
            }
            let task = session.downloadTask(with: server.url(for: "/plain.bin"))
            task.resume()
            #expect(delegate.wait(timeout: 30, for: completed(task)), "\(delegate.calls)")
            #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: data))
            #expect(proxy.events == [.forwarded(method: "GET", url: server.url(for: "/plain.bin").absoluteString)], "\(proxy.events)")
            #expect(server.requests.last?.target == "/plain.bin", "forwarded in origin form")

            // Apple's keys are per scheme: an HTTPS proxy does not carry http URLs.
            let direct = RecordingDelegate()
            let other = fixture.session("direct", delegate: direct) { $0.connectionProxyDictionary = self.httpsProxy(proxy) }
            let second = other.downloadTask(with: server.url(for: "/plain.bin"))
            second.resume()
            #expect(direct.wait(timeout: 30, for: completed(second)), "\(direct.calls)")
            #expect(proxy.events.count == 1, "\(proxy.events)")
            session.invalidateAndCancel()
            other.invalidateAndCancel()
        }
    }

    @Test("A 407 to CONNECT asks the app with the HTTPS proxy's protection space; the tunnel opens with the credential it gives")
    func connectChallengeAsksTheApp() async throws {
        try await onOwnThread { [self] in
            let proxy = try ForwardProxy(requiring: (user: "alice", password: "tunnel pass"))
            defer { proxy.stop() }
            let delegate = RecordingDelegate()
            let port = proxy.port
            delegate.challengeAnswer = { _ in
                (.useCredential, URLCredential(user: "alice", password: "tunnel pass", persistence: .forSession))
            }
            let session = fixture.session("tunnel-auth", delegate: delegate) { $0.connectionProxyDictionary = self.httpsProxy(proxy) }
            let task = session.downloadTask(with: URL(string: nginx.url("trusted", "file.bin"))!)
            task.resume()
            #expect(delegate.wait(timeout: 30, for: completed(task)), "\(delegate.calls)")
            #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
            let asked = delegate.calls.filter { if case .challenge = $0 { return true } else { return false } }
            #expect(asked == [.challenge(task: task.taskIdentifier, method: NSURLAuthenticationMethodHTTPBasic, realm: "proxy", previousFailures: 0, proxy: true)], "\(delegate.calls)")
            let space = delegate.challenges.first?.protectionSpace
            #expect(space?.isProxy() == true)
            #expect(space?.proxyType == NSURLProtectionSpaceHTTPSProxy)
            #expect(space?.host == "127.0.0.1" && space?.port == port)
            let events = proxy.events
            #expect(events.first.map { if case .refused(let line) = $0 { line.hasPrefix("CONNECT ") } else { false } } == true, "\(events)")
            #expect(proxy.tunnels == ["127.0.0.1:\(nginx.port("trusted"))"], "\(events)")
            #expect(nginx.requests.count == 1, "nginx saw only the request sent with the credential")
            session.invalidateAndCancel()
        }
    }

    @Test("An untrusted chain behind the HTTPS proxy: the probe that learns it tunnels through the same proxy; default handling fails with -1202")
    func trustProbeUsesTheProxy() async throws {
        try await onOwnThread { [self] in
            let proxy = try ForwardProxy()
            defer { proxy.stop() }
            let delegate = RecordingDelegate()
            let session = fixture.session("tunnel-trust", delegate: delegate) { $0.connectionProxyDictionary = self.httpsProxy(proxy) }
            let task = session.downloadTask(with: URL(string: nginx.url("otherCA", "file.bin"))!)
            task.resume()
            #expect(delegate.wait(timeout: 30, for: completed(task, code: -1202, status: nil)), "\(delegate.calls)")
            let target = "127.0.0.1:\(nginx.port("otherCA"))"
            // The transfer's tunnel, then the probe's (a verifying handshake and one that only reads the chain).
            #expect(proxy.tunnels.count >= 2 && proxy.tunnels.allSatisfy { $0 == target }, "\(proxy.events)")
            #expect(nginx.requests.isEmpty, "no request reaches a server nobody trusts")
            session.invalidateAndCancel()
        }
    }
}
}
