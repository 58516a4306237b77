import Foundation
import TestPeers
import Testing
import TransferContainer
@testable import TransferTransport

/// TLS against a real peer (nginx, certificates made by openssl at test time): Apple's codes
/// for each kind of bad chain, the presented chain from a handshake-only probe, acceptance by
/// key pin, and HTTP/2 by ALPN multiplexed on one connection per origin.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class TLSTests {
    let certificates: TestCertificates
    let nginx: Nginx

    init() throws {
        let certificates = try TestCertificates.shared.get()
        self.certificates = certificates
        nginx = try Nginx.start(sites: certificates.sites(TestCertificates.Kind.allCases))
        try nginx.serve("small.bin", bytes: 10_000)
    }

    deinit { nginx.stop() }

    private var anchored: TLSPolicy { TLSPolicy(extraAnchors: [certificates.caDER]) }

    /// One GET through a multi: its outcome and the body bytes received.
    private func get(_ url: String, tls: TLSPolicy) throws -> (Result<Void, CurlError>, Data, CurlEasy) {
        let multi = try CurlMulti()
        let easy = try CurlEasy()
        try easy.setURL(url)
        try easy.setTLS(tls)
        var body = Data()
        easy.onBody = { bytes in body.append(contentsOf: bytes); return .consumed }
        try multi.add(easy)
        let results = try drive(multi, count: 1)
        return (results[0].1, body, easy)
    }

    private func drive(_ multi: CurlMulti, count: Int, deadline: Duration = .seconds(20)) throws -> [(CurlEasy, Result<Void, CurlError>)] {
        let end = ContinuousClock.now + deadline
        var completions: [(CurlEasy, Result<Void, CurlError>)] = []
        var none: [CurlMulti.PollRequest] = []
        while completions.count < count {
            try multi.perform()
            while let completion = multi.nextCompletion() { completions.append(completion) }
            if completions.count >= count { break }
            guard ContinuousClock.now < end else { throw PeerProcess.Failure(description: "transfers did not finish in \(deadline)") }
            try multi.poll(extra: &none, timeout: .milliseconds(50))
        }
        return completions
    }

    @Test("Each bad chain fails with Apple's code, and no body byte arrives", arguments: TestCertificates.Kind.allCases)
    func codes(kind: TestCertificates.Kind) throws {
        let (result, body, _) = try get(nginx.url(kind.rawValue, "small.bin"), tls: anchored)
        switch (result, kind.expectedCode) {
        case (.success, nil):
            #expect(body.count == 10_000)
        case (.failure(let error), let expected?):
            #expect(error.urlErrorCode == expected, "\(kind): \(error)")
            #expect(error.isServerTrustFailure)
            #expect(body.isEmpty)
        case (let result, let expected):
            Issue.record("\(kind): \(result), expected \(expected.map(String.init) ?? "success")")
        }
    }

    @Test("A chain from a CA that is not in the store is untrusted (-1202) until the CA is an extra anchor")
    func privateCA() throws {
        let (result, body, _) = try get(nginx.url("trusted", "small.bin"), tls: .systemDefault)
        guard case .failure(let error) = result else { Issue.record("a private CA was trusted by default"); return }
        #expect(error.urlErrorCode == TransferFailure.serverCertificateUntrusted)
        #expect(body.isEmpty)
        let (anchoredResult, anchoredBody, _) = try get(nginx.url("trusted", "small.bin"), tls: anchored)
        #expect((try? anchoredResult.get()) != nil)
        #expect(anchoredBody.count == 10_000)
    }

    @Test("The probe gives the presented chain and the default evaluation, trusted or not", arguments: TestCertificates.Kind.allCases)
    func probe(kind: TestCertificates.Kind) throws {
        let record = try ServerChainProbe.evaluate(url: nginx.url(kind.rawValue, "small.bin"), policy: anchored, timeout: 10).get()
        #expect(record.failureCode == kind.expectedCode)
        #expect(record.certificates.first == certificates.der(kind))
        #expect(record.host == "127.0.0.1")
        #expect(record.port == nginx.port(kind.rawValue))
        #expect(record.leafPublicKeyPin?.hasPrefix("sha256//") == true)
        // Only handshakes: nginx logged no request.
        #expect(!nginx.requests.contains { $0.port == nginx.port(kind.rawValue) })
    }

    @Test("An accepted chain is pinned to its key: that server's body arrives, another key is refused")
    func pinning() throws {
        let selfSigned = try ServerChainProbe.evaluate(url: nginx.url("selfSigned", "/"), timeout: 10).get()
        let pin = try #require(selfSigned.leafPublicKeyPin)
        let (result, body, _) = try get(nginx.url("selfSigned", "small.bin"), tls: TLSPolicy(acceptedPublicKeyPin: pin))
        #expect((try? result.get()) != nil)
        #expect(body.count == 10_000)
        // The other servers use the leaf key, not the self-signed one's.
        let (other, otherBody, _) = try get(nginx.url("expired", "small.bin"), tls: TLSPolicy(acceptedPublicKeyPin: pin))
        guard case .failure(let error) = other else { Issue.record("a pin for another key let the exchange through"); return }
        #expect(error.urlErrorCode == TransferFailure.serverCertificateUntrusted)
        #expect(otherBody.isEmpty)
    }

    @Test("HTTP/2 by ALPN: the protocol is h2, a range is honoured, and transfers to one origin share one connection")
    func http2() throws {
        let whole = try nginx.serve("big.bin", bytes: 300_000, seed: 7)
        let multi = try CurlMulti()
        var bodies: [ObjectIdentifier: Data] = [:]
        var handles: [CurlEasy] = []
        for index in 0..<8 {
            let easy = try CurlEasy()
            try easy.setURL(nginx.url("trusted", "big.bin?n=\(index)"))
            try easy.setTLS(anchored)
            if index == 7 { easy.setRange(from: 100_000) }
            let id = ObjectIdentifier(easy)
            bodies[id] = Data()
            easy.onBody = { bytes in bodies[id, default: Data()].append(contentsOf: bytes); return .consumed }
            try multi.add(easy)
            handles.append(easy)
        }
        let results = try drive(multi, count: handles.count)
        for (easy, result) in results {
            #expect((try? result.get()) != nil)
            #expect(easy.networkProtocolName == "h2")
        }
        #expect(bodies[ObjectIdentifier(handles[0])] == whole)
        #expect(handles[7].responseCode == 206)
        #expect(bodies[ObjectIdentifier(handles[7])] == whole.subdata(in: 100_000..<whole.count))
        let logged = nginx.requests.filter { $0.uri.hasPrefix("/big.bin") }
        #expect(logged.count == 8)
        #expect(Set(logged.map(\.connection)).count == 1, "connections: \(logged.map(\.connection))")
        #expect(logged.allSatisfy { $0.protocolName == "HTTP/2.0" })
    }
}
