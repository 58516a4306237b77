internal import CCurl
import Foundation
import TransferContainer

/// A libcurl failure, typed for the engine.
///
/// A value type, created on the event-loop thread and freely sent elsewhere. `kind` is what the
/// engine maps to `URLError` codes; `code` is libcurl's raw number (in the space named by
/// `origin`) and `message` is for logs and `localizedDescription`-style text.
package struct CurlError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What went wrong, in the terms the engine reports to clients.
    package enum Kind: Sendable, Equatable {
        /// No connection could be made (refused, unreachable).
        case couldNotConnect
        /// The host name did not resolve.
        case cannotResolveHost
        /// The connection broke mid-exchange: receive/send error, short body, empty reply.
        case connectionLost
        /// A connect timeout, the low-speed limit or the idle timeout (`setIdleTimeout`) fired.
        case timedOut
        /// One of our callbacks asked to stop (onBody `.abort`, onUploadRead `.abort`,
        /// onProgress returning false).
        case aborted
        /// libcurl could not hand received bytes over (not an abort we asked for).
        case writeFailed
        /// libcurl could not get upload bytes (or could not rewind them for a resend).
        case readFailed
        /// More redirects than `setFollowsRedirects(_:maximum:)` allows.
        case tooManyRedirects
        /// The URL could not be parsed.
        case badURL
        /// A scheme other than http/https, including as a redirect target.
        case unsupportedProtocol
        /// TLS handshake failure, or a certificate failure none of the cases below names.
        case secureConnectionFailed
        /// The server's chain did not verify: `urlErrorCode` is Apple's code for why
        /// (-1201 bad date, -1202 untrusted or wrong host, -1203 unknown root, -1204 not yet
        /// valid), from OpenSSL's verify result (CURLINFO_SSL_VERIFYRESULT).
        case serverTrustFailed(urlErrorCode: Int)
        /// A redirect from a server trusted only by the key the app accepted for it, to another
        /// origin (`url`): not followed under that key; that server is judged on its own.
        case redirectFromAcceptedKey
        /// The server wants a client certificate and none was sent (-1206).
        case clientCertificateRequired
        /// Response headers past `TransferLimits`, or one line past libcurl's 100 KB (which
        /// libcurl reports as "Out of memory"): -1103, Apple's closest code, never retried.
        case dataLengthExceedsMaximum
        /// Anything else (see `code` and `message`).
        case other
    }

    /// Which libcurl number space `code` belongs to.
    package enum Origin: Sendable, Equatable {
        /// A `CURLcode`: the result of a transfer or an easy-handle call.
        case transfer
        /// A `CURLMcode`: a multi-handle call failed.
        case multi
        /// A `CURLUcode`: URL parsing failed.
        case url
    }

    package let kind: Kind
    package let origin: Origin
    /// libcurl's raw error number.
    package let code: Int
    /// `curl_easy_strerror` (or the multi/URL equivalent) plus libcurl's detailed error text.
    package let message: String
    /// The URL the exchange had reached when it failed, where that matters: for server trust
    /// the chain to judge is that server's, which after a redirect is not the task's URL.
    package var url: String?

    package var description: String {
        "curl \(origin) error \(code) (\(kind)): \(message)"
    }

    package init(kind: Kind, origin: Origin, code: Int, message: String) {
        self.kind = kind
        self.origin = origin
        self.code = code
        self.message = message
    }

    /// The stop of an exchange at a redirect to another origin (see `RedirectOriginCheck`).
    init(redirectFromAcceptedKeyTo target: String) {
        self.init(kind: .redirectFromAcceptedKey, origin: .transfer, code: Int(CURLE_WRITE_ERROR.rawValue),
                  message: "redirected to \(target), another origin than the one whose key the app accepted: not followed under that key")
        url = target
    }

    /// The error for a `CURLcode` (raw value), with the text of CURLOPT_ERRORBUFFER if any.
    /// `callbackAborted` says one of our callbacks asked for the stop: libcurl then reports a
    /// write error (write callback) or "aborted by callback", both of which mean `.aborted` to us.
    package init(transferCode rawCode: UInt32, detail: String? = nil, callbackAborted: Bool = false) {
        let code = CURLcode(rawValue: rawCode)
        var text = String(cString: curl_easy_strerror(code))
        if let detail, !detail.isEmpty, detail != text {
            text += ": " + detail
        }
        let kind: Kind
        if callbackAborted,
           code == CURLE_WRITE_ERROR || code == CURLE_READ_ERROR
            || code == CURLE_ABORTED_BY_CALLBACK || code == CURLE_OK
        {
            kind = .aborted
        } else {
            kind = Self.kind(of: code)
        }
        self.init(kind: kind, origin: .transfer, code: Int(rawCode), message: text)
    }

    /// The error for CURLE_PEER_FAILED_VERIFICATION or CURLE_SSL_CONNECT_ERROR, made precise:
    /// `verifyResult` is OpenSSL's X509_V_ERR_* code (CURLINFO_SSL_VERIFYRESULT).
    package init(tlsCode rawCode: UInt32, verifyResult: Int, detail: String?, url: String? = nil) {
        let base = CurlError(transferCode: rawCode, detail: detail)
        let kind: Kind
        if rawCode == CURLE_PEER_FAILED_VERIFICATION.rawValue {
            kind = .serverTrustFailed(urlErrorCode: ServerTrustRecord.urlErrorCode(verifyResult: verifyResult))
        } else if let detail, detail.lowercased().contains("certificate required") {
            // TLS 1.3's certificate_required alert (116), as OpenSSL words it.
            kind = .clientCertificateRequired
        } else {
            kind = base.kind
        }
        self.init(kind: kind, origin: .transfer, code: Int(rawCode), message: base.message)
        self.url = url
    }

    /// The error for a failed multi-handle call.
    package init(multiCode rawCode: Int32) {
        let text = String(cString: curl_multi_strerror(CURLMcode(rawValue: rawCode)))
        self.init(kind: .other, origin: .multi, code: Int(rawCode), message: text)
    }

    /// The error for a URL that `curl_url_set` rejected.
    package init(urlCode rawCode: UInt32) {
        let code = CURLUcode(rawValue: rawCode)
        let text = String(cString: curl_url_strerror(code))
        let kind: Kind = code == CURLUE_UNSUPPORTED_SCHEME ? .unsupportedProtocol : .badURL
        self.init(kind: kind, origin: .url, code: Int(rawCode), message: text)
    }

    private static func kind(of code: CURLcode) -> Kind {
        switch code {
        case CURLE_COULDNT_CONNECT:
            return .couldNotConnect
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .cannotResolveHost
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING,
             CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3:
            return .connectionLost
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut
        case CURLE_ABORTED_BY_CALLBACK:
            return .aborted
        case CURLE_WRITE_ERROR:
            return .writeFailed
        case CURLE_READ_ERROR, CURLE_SEND_FAIL_REWIND:
            return .readFailed
        case CURLE_TOO_MANY_REDIRECTS:
            return .tooManyRedirects
        case CURLE_URL_MALFORMAT:
            return .badURL
        case CURLE_OUT_OF_MEMORY:
            return .dataLengthExceedsMaximum
        case CURLE_UNSUPPORTED_PROTOCOL:
            return .unsupportedProtocol
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
             CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_SHUTDOWN_FAILED, CURLE_USE_SSL_FAILED:
            return .secureConnectionFailed
        default:
            return .other
        }
    }
}

extension CurlError {
    /// The `URLError` code Apple uses for a transport failure.
    package var urlErrorCode: Int {
        switch kind {
        case .couldNotConnect: TransferFailure.cannotConnectToHost
        case .cannotResolveHost: -1003
        case .secureConnectionFailed: TransferFailure.secureConnectionFailed
        case .serverTrustFailed(let code): code
        case .redirectFromAcceptedKey: TransferFailure.serverCertificateUntrusted
        case .clientCertificateRequired: TransferFailure.clientCertificateRequired
        case .connectionLost: TransferFailure.networkConnectionLost
        case .timedOut: TransferFailure.timedOut
        case .aborted: TransferFailure.cancelled
        case .writeFailed: TransferFailure.cannotWriteToFile
        case .readFailed: TransferFailure.fileDoesNotExist
        case .tooManyRedirects: -1007
        case .badURL: TransferFailure.badURL
        case .unsupportedProtocol: TransferFailure.unsupportedURL
        case .dataLengthExceedsMaximum: TransferFailure.dataLengthExceedsMaximum
        default: TransferFailure.unknown
        }
    }
}
