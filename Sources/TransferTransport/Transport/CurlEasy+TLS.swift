internal import CCurl
import Foundation
import TransferContainer

/// TLS trust, the presented chain and the negotiated protocol of a `CurlEasy`. Same thread
/// rules as the handle (the event-loop thread that owns it).
extension CurlEasy {
    /// Sets how the server's chain is trusted (see `TLSPolicy`). Applied to the next
    /// connection; an existing connection libcurl reuses was made under its own policy, and
    /// libcurl reuses a connection only for a handle with the same TLS options.
    package func setTLS(_ policy: TLSPolicy) throws(CurlError) {
        let code = applyTLS(policy)
        guard code == CURLE_OK else { throw CurlError(transferCode: code.rawValue) }
    }

    func applyTLS(_ policy: TLSPolicy) -> CURLcode {
        var code = CURLE_OK
        func record(_ result: CURLcode) { if code == CURLE_OK { code = result } }
        redirectCheck = policy.acceptedPublicKeyPin == nil ? nil : RedirectOriginCheck()
        if let pin = policy.acceptedPublicKeyPin {
            // The app accepted this chain: no verification, but only this key will do, and
            // only at this origin (`RedirectOriginCheck`).
            record(ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 0))
            record(ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 0))
            record(ccurl_easy_setopt_string(handle, CURLOPT_PINNEDPUBLICKEY, pin))
        } else {
            record(ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1))
            record(ccurl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2))
            record(ccurl_easy_setopt_string(handle, CURLOPT_PINNEDPUBLICKEY, nil))
        }
        if TrustAnchorBundle.systemBundleExists {
            record(ccurl_easy_setopt_string(handle, CURLOPT_CAINFO, TrustAnchorBundle.systemBundlePath))
            record(ccurl_easy_setopt_string(handle, CURLOPT_CAPATH, TrustAnchorBundle.systemDirectory))
        }
        if policy.extraAnchors.isEmpty {
            record(ccurl_easy_setopt_blob(handle, CURLOPT_CAINFO_BLOB, nil, 0, 0))
        } else {
            let bundle = TrustAnchorBundle.bundle(with: policy.extraAnchors)
            record(ccurl_easy_setopt_blob(handle, CURLOPT_CAINFO_BLOB, bundle.baseAddress, bundle.count, 0))
        }
        return code
    }

    /// Keep the presented chain of the next connection (`peerCertificates`). libcurl fills it
    /// in only for a handshake whose chain verified (or with verification off): after a
    /// verification failure it is empty, which is what `ServerChainProbe` is for.
    package func setCollectsCertificates(_ on: Bool) {
        _ = ccurl_easy_setopt_long(handle, CURLOPT_CERTINFO, on ? 1 : 0)
    }

    /// OpenSSL's verify result for the last connection (X509_V_ERR_*; 0 = verified).
    package var sslVerifyResult: Int {
        getLong(CURLINFO_SSL_VERIFYRESULT) ?? 0
    }

    /// The chain of the last connection, DER, leaf first (with `setCollectsCertificates(true)`).
    package var peerCertificates: [Data] {
        var chain: [Data] = []
        let count = ccurl_easy_certificate_count(handle)
        guard count > 0 else { return [] }
        for index in 0..<count {
            var field = ccurl_easy_certificate_fields(handle, index)
            while let node = field {
                if let data = node.pointee.data {
                    let text = String(cString: data)
                    if text.hasPrefix("Cert:") {
                        chain += CertificatePEM.certificates(in: String(text.dropFirst(5)))
                    }
                }
                field = UnsafePointer(node.pointee.next)
            }
        }
        return chain
    }

    /// The protocol of the last response in ALPN's words ("h2", "http/1.1"), nil before one.
    package var networkProtocolName: String? {
        switch getLong(CURLINFO_HTTP_VERSION) ?? 0 {
        case Int(CURL_HTTP_VERSION_1_0): "http/1.0"
        case Int(CURL_HTTP_VERSION_1_1): "http/1.1"
        case Int(CURL_HTTP_VERSION_2_0): "h2"
        case Int(CURL_HTTP_VERSION_3): "h3"
        default: nil
        }
    }
}
