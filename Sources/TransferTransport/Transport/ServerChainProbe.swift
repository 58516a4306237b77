internal import CCurl
import Foundation
import TransferContainer

/// Learns what an HTTPS server presents and what the default evaluation makes of it, without
/// sending a request: a TLS handshake only (CURLOPT_CONNECT_ONLY), so no header and no body
/// byte goes to or comes from a server nobody trusts yet.
///
/// Why a probe: libcurl hands over the chain (CURLINFO_CERTINFO) only when the handshake got
/// past verification; after a verification failure it is empty (measured with libcurl 7.88).
/// So a failed evaluation is followed by a second handshake with verification off, kept for
/// its chain only.
///
/// Blocking (up to `timeout` in all, its deadline for connecting and both handshakes): call
/// it from a thread that may wait, never from the event loop. Each call uses handles of its
/// own; any thread.
package enum ServerChainProbe {
    /// The chain `url`'s server presents and the default evaluation under `policy`'s extra
    /// anchors; a failure when no handshake could be made at all (refused, timed out, not TLS).
    package static func evaluate(url: String, policy: TLSPolicy = .systemDefault, proxy: String? = nil, timeout: Double = 30) -> Result<ServerTrustRecord, CurlError> {
        guard let endpoint = ProtectionSpaceRecord.endpoint(of: url) else {
            return .failure(CurlError(kind: .badURL, origin: .url, code: 0, message: "no host in \(url)"))
        }
        let anchorsOnly = TLSPolicy(extraAnchors: policy.extraAnchors)
        let started = Date()
        switch handshake(url: url, verify: true, policy: anchorsOnly, proxy: proxy, timeout: timeout) {
        case .success(let chain):
            return .success(ServerTrustRecord(host: endpoint.host, port: endpoint.port, certificates: chain))
        case .failure(let error):
            guard case .serverTrustFailed(let code) = error.kind else { return .failure(error) }
            // Presented, but not trusted: see it again with verification off, for its chain.
            // Within the probe's deadline: what the first handshake left of it (a second at least).
            let left = max(1, timeout - Date().timeIntervalSince(started))
            let chain = (try? handshake(url: url, verify: false, policy: anchorsOnly, proxy: proxy, timeout: left).get()) ?? []
            return .success(ServerTrustRecord(host: endpoint.host, port: endpoint.port, certificates: chain,
                                              failureCode: code, failureReason: error.message))
        }
    }

    /// One handshake; the presented chain when it succeeded.
    private static func handshake(url: String, verify: Bool, policy: TLSPolicy, proxy: String?, timeout: Double) -> Result<[Data], CurlError> {
        do {
            let easy = try CurlEasy()
            try easy.setURL(url)
            try easy.setTLS(policy)
            if !verify { easy.disableVerification() }
            easy.setCollectsCertificates(true)
            easy.setTimeouts(connect: timeout, lowSpeedLimit: nil, lowSpeedTime: nil)
            easy.setProxy(proxy, user: nil, password: nil, schemes: [.basic, .digest])
            easy.setConnectOnly()
            let code = curl_easy_perform(easy.handle)
            if case .failure(let error) = easy.completionResult(code: code.rawValue) { return .failure(error) }
            return .success(easy.peerCertificates)
        } catch {
            return .failure(error)
        }
    }
}

extension CurlEasy {
    /// Connect (TCP, proxy tunnel, TLS) and stop there: no request is sent.
    func setConnectOnly() {
        _ = ccurl_easy_setopt_long(handle, CURLOPT_CONNECT_ONLY, 1)
    }

    /// For the probe's second look only: accept any chain, pin nothing.
    func disableVerification() {
        _ = ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 0)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 0)
    }
}
