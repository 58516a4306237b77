import Foundation
import FoundationNetworking
import TransferContainer

// swift-corelibs-foundation marks Apple's server-trust API unavailable on Linux (it has no
// Security framework). These declarations take the same names, so that Apple-style code
//
//     if challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
//        let trust = challenge.protectionSpace.serverTrust {
//         completionHandler(.useCredential, URLCredential(trust: trust))
//     }
//
// compiles and means the same here (Swift prefers an available declaration to an unavailable one).

/// The authentication method of a server-trust challenge (S3.6).
public let NSURLAuthenticationMethodServerTrust = "NSURLAuthenticationMethodServerTrust"

/// What a server presented in its TLS handshake and what the default evaluation made of it:
/// this library's `SecTrust`. Immutable; any thread.
public final class SecTrust: @unchecked Sendable, CustomStringConvertible {
    let record: ServerTrustRecord

    init(_ record: ServerTrustRecord) {
        self.record = record
    }

    /// The host and port the chain was presented for.
    public var host: String { record.host }
    public var port: Int { record.port }
    /// The presented chain, DER, the server's certificate first (`SecTrustCopyCertificateChain`).
    public var certificateChain: [Data] { record.certificates }
    /// Whether the chain verifies against the system's trust store (`SecTrustEvaluateWithError`).
    public var isTrustedByDefault: Bool { record.isTrustedByDefault }
    /// Why it does not: the `URLError` code the task would fail with (-1201…-1204, -1200).
    public var evaluationErrorCode: Int? { record.failureCode }

    public var description: String {
        "SecTrust(\(host):\(port), \(certificateChain.count) certificates, \(isTrustedByDefault ? "trusted" : "not trusted: \(record.failureReason ?? "\(record.failureCode ?? 0)")"))"
    }
}

/// `SecTrustEvaluateWithError`: whether the chain verifies by default; the failure, if not.
public func SecTrustEvaluateWithError(_ trust: SecTrust, _ error: UnsafeMutablePointer<Error?>?) -> Bool {
    if let code = trust.evaluationErrorCode {
        error?.pointee = URLError(URLError.Code(rawValue: code) ?? .secureConnectionFailed, userInfo: [NSLocalizedDescriptionKey: trust.record.failureReason ?? "the server's certificate is not trusted"])
        return false
    }
    return true
}

/// `SecTrustCopyCertificateChain`: the presented certificates, DER, leaf first.
public func SecTrustCopyCertificateChain(_ trust: SecTrust) -> [Data]? {
    trust.certificateChain
}

/// The protection space of a server-trust challenge, which carries the trust.
final class ServerTrustProtectionSpace: URLProtectionSpace, @unchecked Sendable {
    let trust: SecTrust

    init(trust: SecTrust) {
        self.trust = trust
        super.init(host: trust.host, port: trust.port, protocol: "https", realm: nil, authenticationMethod: NSURLAuthenticationMethodServerTrust)
    }

    required init?(coder: NSCoder) { nil }
}

extension URLProtectionSpace {
    /// The server's chain and its default evaluation, for a server-trust challenge; nil otherwise.
    public var serverTrust: SecTrust? {
        (self as? ServerTrustProtectionSpace)?.trust
    }
}

extension URLCredential {
    /// Accepts the chain `trust` presented, for that server's key only.
    public convenience init(trust: SecTrust) {
        // URLCredential cannot carry more fields in an extension: the accepted key's pin
        // travels as the credential's password under a user name no person has.
        self.init(user: URLCredential.serverTrustUser, password: trust.record.leafPublicKeyPin ?? "", persistence: .forSession)
    }

    static let serverTrustUser = "\u{0}NSURLAuthenticationMethodServerTrust"

    /// The public key pin of a credential made with `init(trust:)`; nil for others.
    var acceptedServerKeyPin: String? {
        guard user == URLCredential.serverTrustUser, let pin = password, !pin.isEmpty else { return nil }
        return pin
    }
}

extension URLAuthenticationChallenge {
    /// The server-trust challenge for `trust` (S3.6).
    convenience init(serverTrust trust: SecTrust) {
        self.init(protectionSpace: ServerTrustProtectionSpace(trust: trust), proposedCredential: nil, previousFailureCount: 0,
                  failureResponse: nil, error: nil, sender: InertChallengeSender())
    }
}
