import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

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
/// this library's `SecTrust`. An app may judge it against anchors of its own
/// (`SecTrustSetAnchorCertificates`), as on Apple's systems. Any thread (behind a lock).
public final class SecTrust: @unchecked Sendable, CustomStringConvertible {
    let record: ServerTrustRecord
    /// Anchors the app set, whether they replace the system's store (Apple's default once
    /// set), and the chain as they judge it, once asked (a verification is not repeated for
    /// every property read).
    private let judgement = Locked<(anchors: [Data]?, anchorsOnly: Bool, judged: ServerTrustRecord?)>((nil, true, nil))

    init(_ record: ServerTrustRecord) {
        self.record = record
    }

    /// The record as the app's anchors judge it (or as the default evaluation did).
    var evaluated: ServerTrustRecord {
        judgement.withLock { state in
            guard let anchors = state.anchors else { return record }
            if let judged = state.judged { return judged }
            let judged = record.evaluated(anchors: anchors, anchorsOnly: state.anchorsOnly)
            state.judged = judged
            return judged
        }
    }

    func setAnchors(_ anchors: [Data]?) { judgement.withLock { $0 = (anchors, $0.anchorsOnly, nil) } }
    func setAnchorsOnly(_ only: Bool) { judgement.withLock { $0 = ($0.anchors, only, nil) } }

    /// The host the chain was presented for.
    public var host: String { record.host }
    /// The port the chain was presented on.
    public var port: Int { record.port }
    /// The presented chain, DER, the server's certificate first (`SecTrustCopyCertificateChain`).
    public var certificateChain: [Data] { record.certificates }
    /// Whether the chain verifies against the system's trust store, or the anchors the app set
    /// (`SecTrustEvaluateWithError`).
    public var isTrustedByDefault: Bool { evaluated.isTrustedByDefault }
    /// Why it does not: the `URLError` code the task would fail with (-1201…-1204, -1200).
    public var evaluationErrorCode: Int? { evaluated.failureCode }

    /// Host, port, the chain's length and the verdict, for logs.
    public var description: String {
        "SecTrust(\(host):\(port), \(certificateChain.count) certificates, \(isTrustedByDefault ? "trusted" : "not trusted: \(record.failureReason ?? "\(record.failureCode ?? 0)")"))"
    }
}

// Core Foundation's names as Apple's trust code spells them (`var error: CFError?`,
// `SecTrustCopyCertificateChain(trust) as? [SecCertificate]`, `SecCertificateCopyData(c) as Data`):
// corelibs keeps Core Foundation out of Swift's sight, so here they name the Swift types the
// functions below take and give.
/// Apple's `CFError`: here any `Error`.
public typealias CFError = any Error
/// Apple's `CFArray`: here an array of anything, cast as Apple's code casts it.
public typealias CFArray = [Any]
/// Apple's `CFData`: here `Data`.
public typealias CFData = Data

/// `SecTrustEvaluateWithError`: whether the chain verifies (against the system's store, or
/// the anchors set with `SecTrustSetAnchorCertificates`); the failure, if not.
public func SecTrustEvaluateWithError(_ trust: SecTrust, _ error: UnsafeMutablePointer<CFError?>?) -> Bool {
    let judged = trust.evaluated
    if let code = judged.failureCode {
        error?.pointee = URLError(URLError.Code(rawValue: code) ?? .secureConnectionFailed, userInfo: [NSLocalizedDescriptionKey: judged.failureReason ?? "the server's certificate is not trusted"])
        return false
    }
    return true
}

/// `SecTrustCopyCertificateChain`: the presented certificates (`SecCertificate`), leaf first.
public func SecTrustCopyCertificateChain(_ trust: SecTrust) -> CFArray? {
    trust.certificateChain.map(SecCertificate.init(der:))
}

/// Apple's status codes, as far as this API returns them.
public typealias OSStatus = Int32
/// The call succeeded (`errSecSuccess`).
public let errSecSuccess: OSStatus = 0
/// One of the certificates given is not one (`errSecParam`).
public let errSecParam: OSStatus = -50

/// `SecTrustSetAnchorCertificates`: judge the chain against these roots instead of the
/// system's store (add the store back with `SecTrustSetAnchorCertificatesOnly(trust, false)`).
@discardableResult
public func SecTrustSetAnchorCertificates(_ trust: SecTrust, _ anchorCertificates: [SecCertificate]?) -> OSStatus {
    trust.setAnchors(anchorCertificates?.map(\.der))
    return errSecSuccess
}

/// `SecTrustSetAnchorCertificates` as Apple's code calls it, with `[root] as CFArray`: the
/// same, once every element is a ``SecCertificate`` (else `errSecParam`, and nothing changes).
@discardableResult
public func SecTrustSetAnchorCertificates(_ trust: SecTrust, _ anchorCertificates: CFArray) -> OSStatus {
    let certificates = anchorCertificates.compactMap { $0 as? SecCertificate }
    guard certificates.count == anchorCertificates.count else { return errSecParam }
    return SecTrustSetAnchorCertificates(trust, certificates)
}

/// `SecTrustSetAnchorCertificatesOnly`: whether the anchors set replace the system's store (true, the default) or add to it.
@discardableResult
public func SecTrustSetAnchorCertificatesOnly(_ trust: SecTrust, _ anchorCertificatesOnly: Bool) -> OSStatus {
    trust.setAnchorsOnly(anchorCertificatesOnly)
    return errSecSuccess
}

/// A certificate (DER): this library's `SecCertificate`. Immutable; any thread.
public final class SecCertificate: @unchecked Sendable, Equatable {
    let der: Data
    init(der: Data) { self.der = der }
    /// Two certificates are equal when their DER bytes are.
    public static func == (a: SecCertificate, b: SecCertificate) -> Bool { a.der == b.der }
}

/// `SecCertificateCreateWithData`: a certificate from its DER bytes; nil when they are not one.
public func SecCertificateCreateWithData(_ allocator: AnyObject?, _ data: Data) -> SecCertificate? {
    ServerTrustRecord.publicKeyPin(ofCertificate: data) == nil ? nil : SecCertificate(der: data)
}

/// `SecCertificateCopyData`: the certificate's DER bytes.
public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData {
    certificate.der
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
