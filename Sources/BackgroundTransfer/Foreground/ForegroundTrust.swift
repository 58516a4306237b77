import Foundation
import FoundationNetworking
import TransferContainer

extension LocalSessionCore {
    /// Starts a data or upload task FoundationNetworking carries out. Over HTTPS the chain is
    /// judged first, once per origin, as for download tasks (S2.6, S3.6), on `trustQueue`:
    /// the session delegate's server-trust challenge if it has one, else the default
    /// evaluation, which fails with Apple's code (corelibs says -1 for every TLS failure).
    /// A chain the system trusts goes ahead; one the delegate
    /// accepted although the system does not cannot be handed to FoundationNetworking, which
    /// verifies against the system's store only, so the task fails with -1202 saying so
    /// rather than with a bare TLS error; a cancelled challenge ends it with -999.
    func resumeForeground(_ task: URLSessionTask, _ inner: FoundationNetworking.URLSessionTask) {
        guard inner.state == .suspended, let url = inner.originalRequest?.url, url.scheme?.lowercased() == "https" else {
            return inner.resume()
        }
        let configuration = (try? self.configuration.record()) ?? SessionConfiguration()
        trustQueue.async {
            let failure: TransferFailure
            switch self.serverTrustDecision(for: url.absoluteString, configuration: configuration) {
            case .proceed(let policy) where policy == .systemDefault:
                return inner.resume()
            case .proceed:
                failure = TransferFailure(code: TransferFailure.serverCertificateUntrusted,
                                          message: "the delegate accepted the certificate of \(url.host ?? "the server"), which the system does not trust; a default session's data and upload tasks verify against the system's store only: use a download task, or a background session, for this server",
                                          subject: url.absoluteString)
            case .fail(let refused):
                failure = refused
            }
            guard let bridge = self.foregroundSession.withLock({ $0 })?.bridge else { return }
            bridge.fail(inner, with: failure.urlError(failingURL: url.absoluteString))
        }
    }
}
