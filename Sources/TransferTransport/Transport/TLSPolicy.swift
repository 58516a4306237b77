import Foundation
import TransferContainer
import TransferPOSIX

/// How an exchange decides whether to trust the server's TLS chain (S2.6, S3.6). A value type,
/// any thread; the engine or a default session picks one per exchange.
///
/// - By default the chain is verified against the system's store (Debian's CA bundle), host
///   name included.
/// - `extraAnchors` are CA certificates trusted *in addition* to the store (the host's
///   "keychain": `host-app trust-certificate`).
/// - `acceptedPublicKeyPin` is the app's acceptance of one chain (`URLCredential(trust:)`):
///   verification is off and the connection succeeds only if the server's key is exactly
///   that one, so accepting covers that key and nothing else.
package struct TLSPolicy: Sendable, Equatable, Hashable {
    /// DER CA certificates trusted besides the system store.
    package var extraAnchors: [Data]
    /// "sha256//<base64>" of the accepted leaf's SubjectPublicKeyInfo (`ServerTrustRecord.leafPublicKeyPin`).
    package var acceptedPublicKeyPin: String?

    package init(extraAnchors: [Data] = [], acceptedPublicKeyPin: String? = nil) {
        self.extraAnchors = extraAnchors
        self.acceptedPublicKeyPin = acceptedPublicKeyPin
    }

    package static let systemDefault = TLSPolicy()
}

/// The CA bundle libcurl verifies with: the system's, plus a policy's extra anchors.
///
/// libcurl 7.88 uses CURLOPT_CAINFO_BLOB *instead of* CURLOPT_CAINFO (measured: a CA in the
/// file is no longer trusted once a blob is set), so extra anchors go in a blob that holds the
/// system bundle too. Each distinct set of anchors is built once per process and kept for its
/// life (handed to libcurl without copying); there are few such sets. Thread-safe.
enum TrustAnchorBundle {
    /// Debian's bundle (ca-certificates); named explicitly so that verification does not
    /// depend on how libcurl was configured.
    static let systemBundlePath = "/etc/ssl/certs/ca-certificates.crt"
    static let systemDirectory = "/etc/ssl/certs"

    /// Whether the system bundle can be read, looked at again at most once a second: every
    /// transfer's set-up asks (twice), and an `access` call each time was a cost of every
    /// small download, while the bundle comes and goes only with the package.
    static var systemBundleExists: Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        return bundleCheck.withLock { check in
            if let last = check.checkedAt, now &- last < 1_000_000_000 { return check.exists }
            check = (FileManager.default.isReadableFile(atPath: systemBundlePath), now)
            return check.exists
        }
    }

    private static let bundleCheck = Locked<(exists: Bool, checkedAt: UInt64?)>((false, nil))

    private static let lock = NSLock()
    nonisolated(unsafe) private static var bundles: [[Data]: UnsafeMutableRawBufferPointer] = [:]

    /// The bytes of the system bundle followed by `anchors` as PEM; never freed.
    static func bundle(with anchors: [Data]) -> UnsafeRawBufferPointer {
        lock.lock()
        defer { lock.unlock() }
        if let bundle = bundles[anchors] { return UnsafeRawBufferPointer(bundle) }
        var bytes = (try? Data(contentsOf: URL(fileURLWithPath: systemBundlePath))) ?? Data()
        if let last = bytes.last, last != 0x0A { bytes.append(0x0A) }
        for anchor in anchors { bytes.append(Data(CertificatePEM.pem(of: anchor).utf8)) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, bytes.count), alignment: 1)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        let bundle = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<bytes.count])
        bundles[anchors] = bundle
        return UnsafeRawBufferPointer(bundle)
    }
}
