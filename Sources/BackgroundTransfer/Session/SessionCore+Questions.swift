import Foundation
import FoundationNetworking
import TransferContainer

/// What the daemon asks the app about a task before it goes on: `willBeginDelayedRequest`
/// (S5.1), an authentication challenge (S3.1), refreshed headers before a retry (ours).
/// Each runs on the delivery queue, in order with the session's events; the delegate's
/// answer is sent back when it calls its completion handler, before that call returns, so an
/// app launched for a challenge has answered before it calls its own completion handler.
extension SessionCore {
    func askDelayedRequest(_ task: URLSessionTask) {
        let answer: @Sendable (URLSession.DelayedRequestDisposition, URLRequest?) -> Void = { [weak self] disposition, newRequest in
            guard let self else { return }
            let reply: DelayedRequestAnswer
            switch disposition {
            case .continueLoading: reply = .continueLoading
            case .cancel: reply = .cancel
            case .useNewRequest:
                guard let newRequest else {
                    log.error("session", "willBeginDelayedRequest answered .useNewRequest without a request; continuing with the original", session: identifier.rawValue, task: task.taskIdentifier)
                    reply = .continueLoading
                    break
                }
                // A download task sends the new request's body, as it would have sent one given
                // at creation; an upload's body stays its file.
                let body = task is URLSessionDownloadTask ? NewRequestBody(of: newRequest) : .absent
                reply = .useNewRequest(URLSession.record(of: newRequest, configuration: configuration), body: body)
            }
            perform(.answerDelayedRequest(session: identifier, task: task.taskIdentifier, reply), on: task)
        }
        guard let delegate = delegate as? URLSessionTaskDelegate, let request = task.currentRequest else {
            answer(.continueLoading, nil)
            return
        }
        onDelegateQueue { session in
            delegate.urlSession(session, task: task, willBeginDelayedRequest: request, completionHandler: answer)
        }
    }

    func askAboutChallenge(_ record: ChallengeRecord?, of task: URLSessionTask) {
        guard let record else { return }
        let answer: @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void = { [weak self] disposition, credential in
            guard let self else { return }
            let reply = ChallengeAnswer(disposition: disposition.record, credential: credential.flatMap(CredentialRecord.init))
            perform(.answerChallenge(session: identifier, task: task.taskIdentifier, reply), on: task)
        }
        if let trust = record.serverTrust {
            // Server trust is the session's question (S3.6): its delegate's session-level method.
            let challenge = URLAuthenticationChallenge(serverTrust: SecTrust(trust))
            guard let delegate else { return answer(.performDefaultHandling, nil) }
            onDelegateQueue { session in delegate.urlSession(session, didReceive: challenge, completionHandler: answer) }
            return
        }
        let challenge = URLAuthenticationChallenge(record, failureResponse: task.response)
        if let delegate = delegate as? URLSessionTaskDelegate {
            onDelegateQueue { session in delegate.urlSession(session, task: task, didReceive: challenge, completionHandler: answer) }
        } else if let delegate {
            onDelegateQueue { session in delegate.urlSession(session, didReceive: challenge, completionHandler: answer) }
        } else {
            answer(.performDefaultHandling, nil)
        }
    }

    func askForRetryHeaders(_ task: URLSessionTask) {
        let answer: @Sendable ([String: String]?) -> Void = { [weak self] headers in
            guard let self else { return }
            let fields = headers.map { $0.sorted { $0.key < $1.key }.map { HeaderField(name: $0.key, value: $0.value) } }
            perform(.answerRetryHeaders(session: identifier, task: task.taskIdentifier, fields), on: task)
        }
        guard let delegate = delegate as? URLSessionTaskDelegate, let request = task.currentRequest else {
            answer(nil)
            return
        }
        onDelegateQueue { session in delegate.urlSession(session, task: task, willRetry: request, completionHandler: answer) }
    }
}

extension URLSession.AuthChallengeDisposition {
    var record: ChallengeAnswer.Disposition {
        switch self {
        case .useCredential: .useCredential
        case .performDefaultHandling: .performDefaultHandling
        case .cancelAuthenticationChallenge: .cancelAuthenticationChallenge
        case .rejectProtectionSpace: .rejectProtectionSpace
        }
    }
}

extension CredentialRecord {
    /// A credential as the daemon keeps it: a password, or the server key a
    /// `URLCredential(trust:)` accepts; nil for other kinds (client certificates).
    init?(_ credential: URLCredential) {
        if let pin = credential.acceptedServerKeyPin {
            self.init(acceptingServerKey: pin)
            return
        }
        guard let user = credential.user, let password = credential.password else { return nil }
        let persistence: Persistence
        switch credential.persistence {
        case .none: persistence = .none
        case .forSession: persistence = .forSession
        default: persistence = .permanent // .permanent, .synchronizable
        }
        self.init(user: user, password: password, persistence: persistence)
    }
}

extension URLAuthenticationChallenge {
    /// Apple's challenge for the daemon's record: the protection space (host, port, realm,
    /// scheme; a proxy's for a 407), the failure count and the response that asked.
    convenience init(_ record: ChallengeRecord, failureResponse: URLResponse?) {
        let space = record.protectionSpace
        let method = space.method == .digest ? NSURLAuthenticationMethodHTTPDigest : NSURLAuthenticationMethodHTTPBasic
        let protectionSpace = space.isProxy
            ? URLProtectionSpace(proxyHost: space.host, port: space.port, type: space.protocol == "https" ? NSURLProtectionSpaceHTTPSProxy : NSURLProtectionSpaceHTTPProxy, realm: space.realm, authenticationMethod: method)
            : URLProtectionSpace(host: space.host, port: space.port, protocol: space.protocol, realm: space.realm, authenticationMethod: method)
        let proposed = record.proposedUser.map { URLCredential(user: $0, password: "", persistence: .none) }
        self.init(protectionSpace: protectionSpace, proposedCredential: proposed, previousFailureCount: record.previousFailureCount,
                  failureResponse: failureResponse, error: nil, sender: InertChallengeSender())
    }
}

/// Challenges are answered through the delegate's completion handler, never through a
/// sender (as with URLSession on Apple's systems); this one ignores what it is told.
final class InertChallengeSender: NSObject, URLAuthenticationChallengeSender {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}
