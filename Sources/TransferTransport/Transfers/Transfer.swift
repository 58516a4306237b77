import Foundation
import TransferContainer

/// A transfer in flight as the engine drives it, download or upload: its task, its libcurl
/// handle and the progress it reports. Owned by the event loop.
package protocol Transfer: AnyObject {
    var session: SessionKey { get }
    /// The task as this transfer knows it now (counts, response, validator, upload location).
    var task: TaskRecord { get }
    var easy: CurlEasy { get }
    /// When progress was last pushed, and at how many bytes; owned by the engine.
    var lastProgressReport: Date { get set }
    var lastReportedBytes: Int64 { get set }
    /// Bytes received (download) or sent (upload) so far.
    var bytesMoved: Int64 { get }
    /// What to push to an attached client now (S7.3).
    var progress: TaskProgress { get }
    /// Stops using files; the transfer is done with.
    func close()
}

extension CurlEasy {
    /// What every exchange of a task sends and obeys: the session's `httpAdditionalHeaders`,
    /// then the request's own headers (less those `excluded` names, lowercased), then
    /// `extraHeaders`; redirects followed (up to 16); and the idle timeout, the request's
    /// `timeoutInterval` or else the session's `timeoutIntervalForRequest` (S6.4), with
    /// connecting capped at 60 s.
    /// Also the session's proxy, the credentials the engine found for the origin and the
    /// proxy, and how the server's TLS chain is trusted.
    package func apply(_ request: RequestRecord, in configuration: SessionConfiguration, credentials: TransferCredentials, tls: TLSPolicy = .systemDefault, excluding excluded: Set<String> = [], extraHeaders: [String] = []) throws(CurlError) {
        var headers = (configuration.httpAdditionalHeaders ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        headers += request.headers.filter { !excluded.contains($0.name.lowercased()) }.map { "\($0.name): \($0.value)" }
        try setHeaders(headers + extraHeaders)
        setFollowsRedirects(true, maximum: 16)
        let idle = request.timeoutInterval.map { CheckedNumbers.timeout($0, fallback: configuration.timeoutIntervalForRequest) } ?? configuration.timeoutIntervalForRequest
        // Idle means no byte at all for `idle` seconds (Apple), not libcurl's low-speed average.
        setTimeouts(connect: min(idle, 60), lowSpeedLimit: nil, lowSpeedTime: nil)
        setIdleTimeout(idle)
        let server = credentials.server, proxy = credentials.proxy
        setServerCredential(user: server?.credential.user, password: server?.credential.password, schemes: Self.schemes(server?.space))
        setProxy(configuration.proxy(for: request.url), user: proxy?.credential.user, password: proxy?.credential.password, schemes: Self.schemes(proxy?.space))
        try setTLS(tls)
    }

    /// The scheme of the space a credential was given for; either while it is not known.
    private static func schemes(_ space: ProtectionSpaceRecord?) -> AuthSchemes {
        switch space?.method {
        case .basic: .basic
        case .digest: .digest
        case .serverTrust, nil: [.basic, .digest]
        }
    }
}

extension CurlError {
    /// The failure a task ends with for this transport error on `url`: Apple's code, the
    /// failing URL, and for a chain that did not verify, what the server presented
    /// (`serverTrust`, from `ServerChainProbe`).
    package func transferFailure(url: String, serverTrust: ServerTrustRecord? = nil) -> TransferFailure {
        var failure = TransferFailure(code: urlErrorCode, message: description, subject: url)
        failure.failingURL = url
        failure.serverTrust = serverTrust
        return failure
    }

    /// Whether the server's chain did not verify (a probe can then say what it presented), or
    /// a redirect led to a server whose chain is still to be judged.
    package var isServerTrustFailure: Bool {
        switch kind {
        case .serverTrustFailed, .redirectFromAcceptedKey: true
        default: false
        }
    }
}

/// The credentials an exchange sends, with the spaces they were given for (nil space: the
/// scheme is not known yet, libcurl picks Basic or Digest from the server's challenge).
package struct TransferCredentials {
    package var server: (credential: CredentialRecord, space: ProtectionSpaceRecord?)?
    package var proxy: (credential: CredentialRecord, space: ProtectionSpaceRecord?)?

    package static let none = TransferCredentials()

    package init(server: (credential: CredentialRecord, space: ProtectionSpaceRecord?)? = nil, proxy: (credential: CredentialRecord, space: ProtectionSpaceRecord?)? = nil) {
        self.server = server
        self.proxy = proxy
    }
}
