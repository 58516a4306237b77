import Foundation
import Digests

/// What a server presented in its TLS handshake and what the default evaluation made of it:
/// the substance of Apple's `SecTrust` for a server-trust challenge
/// (`NSURLAuthenticationMethodServerTrust`) and of `NSURLErrorFailingURLPeerTrustErrorKey`.
/// Made by the transport from the handshake; a value type, any thread; kept in records as
/// JSON (certificates as base64).
public struct ServerTrustRecord: Codable, Sendable, Equatable {
    /// The host and port the chain was presented for.
    public var host: String
    public var port: Int
    /// The presented chain, DER, the server's own certificate (the leaf) first.
    public var certificates: [Data]
    /// nil when the chain verified against the trust store (and the anchors added to it);
    /// otherwise the `URLError` code of the failure (-1201…-1204, else -1200).
    public var failureCode: Int?
    /// The verifier's own words for a failure ("certificate has expired"), for logs.
    public var failureReason: String?

    public init(host: String, port: Int, certificates: [Data], failureCode: Int? = nil, failureReason: String? = nil) {
        self.host = host
        self.port = port
        self.certificates = certificates
        self.failureCode = failureCode
        self.failureReason = failureReason
    }

    /// Whether the default evaluation trusts the chain.
    public var isTrustedByDefault: Bool { failureCode == nil }

    /// The leaf's public key pin, libcurl's `CURLOPT_PINNEDPUBLICKEY` form
    /// ("sha256//" + base64 of the SHA-256 of its DER SubjectPublicKeyInfo); nil when there is
    /// no leaf or it does not parse. Accepting a chain means accepting exactly this key.
    public var leafPublicKeyPin: String? {
        certificates.first.flatMap(Self.publicKeyPin(ofCertificate:))
    }

    /// Apple's code for an OpenSSL verify result (x509_vfy.h). libcurl's own host-name check
    /// leaves the result at 0 or 1 (X509_V_ERR_UNSPECIFIED): a chain for another host is
    /// untrusted (-1202), as on Apple's systems.
    public static func urlErrorCode(verifyResult: Int) -> Int {
        switch verifyResult {
        case 10, 12: TransferFailure.serverCertificateHasBadDate        // cert / CRL has expired
        case 9, 11: TransferFailure.serverCertificateNotYetValid        // cert / CRL not yet valid
        case 18, 19: TransferFailure.serverCertificateHasUnknownRoot    // self-signed leaf / root not in the store
        case 2, 20, 21, 24, 27, 28, 62, 64: TransferFailure.serverCertificateUntrusted  // unknown or wrong issuer, not trusted, host or IP mismatch
        case 0, 1: TransferFailure.serverCertificateUntrusted
        default: TransferFailure.secureConnectionFailed
        }
    }

    /// The chain judged again here, offline, as a TLS client would now: against `anchors`
    /// and (unless `anchorsOnly`) the system's store, for this record's host (Apple's
    /// `SecTrustSetAnchorCertificates` then `SecTrustEvaluateWithError`).
    public func evaluated(anchors: [Data], anchorsOnly: Bool) -> ServerTrustRecord {
        var judged = self
        let outcome = ServerChainVerifier.verify(certificates, anchors: anchors, useSystemStore: !anchorsOnly, host: host)
        judged.failureCode = outcome.verified ? nil : Self.urlErrorCode(verifyResult: outcome.verifyError)
        judged.failureReason = outcome.verified ? nil : outcome.reason
        return judged
    }

    /// The pin of a DER certificate's public key, or nil when it does not parse.
    public static func publicKeyPin(ofCertificate der: Data) -> String? {
        guard let info = DERCertificate.subjectPublicKeyInfo(of: der) else { return nil }
        var hasher = SHA256()
        hasher.update(info)
        return "sha256//" + Data(hasher.finalize()).base64EncodedString()
    }
}

/// Just enough DER to find a certificate's SubjectPublicKeyInfo (RFC 5280 §4.1): Certificate
/// → tbsCertificate → [version], serialNumber, signature, issuer, validity, subject,
/// subjectPublicKeyInfo. Reads bytes from a peer, so every length is checked; nothing traps.
enum DERCertificate {
    /// One element: its tag and where its whole encoding and its contents lie.
    private struct Element {
        var tag: UInt8
        var whole: Range<Int>
        var contents: Range<Int>
    }

    static func subjectPublicKeyInfo(of der: Data) -> Data? {
        let bytes = [UInt8](der)
        guard let certificate = element(in: bytes, at: 0), certificate.tag == 0x30,
              let tbs = element(in: bytes, at: certificate.contents.lowerBound), tbs.tag == 0x30 else { return nil }
        var offset = tbs.contents.lowerBound
        var fields: [Element] = []
        while offset < tbs.contents.upperBound, fields.count < 8, let field = element(in: bytes, at: offset) {
            fields.append(field)
            offset = field.whole.upperBound
        }
        // Without the explicit [0] version (v1) the key is the sixth field, with it the seventh.
        let index = fields.first?.tag == 0xA0 ? 6 : 5
        guard fields.count > index, fields[index].tag == 0x30, fields[index].whole.upperBound <= tbs.contents.upperBound else { return nil }
        return Data(bytes[fields[index].whole])
    }

    private static func element(in bytes: [UInt8], at start: Int) -> Element? {
        guard start >= 0, start + 2 <= bytes.count else { return nil }
        let tag = bytes[start]
        var offset = start + 1
        let first = Int(bytes[offset])
        offset += 1
        var length = 0
        if first < 0x80 {
            length = first
        } else {
            let count = first & 0x7F
            guard count >= 1, count <= 4, offset + count <= bytes.count else { return nil }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[offset])
                offset += 1
            }
        }
        guard length <= bytes.count - offset else { return nil }
        return Element(tag: tag, whole: start..<(offset + length), contents: offset..<(offset + length))
    }
}

/// PEM ↔ DER for certificates ("-----BEGIN CERTIFICATE-----" blocks).
public enum CertificatePEM {
    /// The DER certificates in PEM text, in order; blocks that do not decode are skipped.
    public static func certificates(in text: String) -> [Data] {
        var result: [Data] = []
        var body: String?
        for line in text.split(whereSeparator: \.isNewline) {
            let line = line.trimmingCharacters(in: .whitespaces)
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----" {
                if let text = body, let der = Data(base64Encoded: text) { result.append(der) }
                body = nil
            } else if let current = body {
                body = current + line
            }
        }
        return result
    }

    /// A DER certificate as PEM text.
    public static func pem(of der: Data) -> String {
        let base64 = der.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
    }
}
