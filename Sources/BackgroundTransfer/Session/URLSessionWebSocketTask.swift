import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// A WebSocket task (Apple's `URLSessionWebSocketTask`), present so that code written for
/// Apple's API compiles, and failing loudly: FoundationNetworking runs WebSockets on
/// libcurl's support for them, which the distributions' libcurl (Debian 12's 7.88) is built
/// without, and this library writes no WebSocket client of its own. Every such task is
/// completed when made with -1002 saying so; `send`, `receive` and `sendPing` hand that
/// error back. Its state is set once, at creation; handlers run on a global queue.
open class URLSessionWebSocketTask: URLSessionTask, @unchecked Sendable {
    /// A message: text or binary (Apple's).
    public enum Message: Sendable {
        case data(Data)
        case string(String)
    }

    /// A close code (Apple's values, RFC 6455).
    public enum CloseCode: Int, Sendable {
        case invalid = 0
        case normalClosure = 1000
        case goingAway = 1001
        case protocolError = 1002
        case unsupportedData = 1003
        case noStatusReceived = 1005
        case abnormalClosure = 1006
        case invalidFramePayloadData = 1007
        case policyViolation = 1008
        case messageTooBig = 1009
        case mandatoryExtensionMissing = 1010
        case internalServerError = 1011
        case tlsHandshakeFailure = 1015
    }

    /// The largest message `receive` would take (Apple's default, 1 MiB).
    open var maximumMessageSize = 1 << 20
    /// The code and reason given to `cancel(with:reason:)` (no connection ever opens here).
    private let closing = Locked<(code: CloseCode, reason: Data?)>((.invalid, nil))
    /// How the connection was closed: `.invalid` until `cancel(with:reason:)` gives a code.
    open var closeCode: CloseCode { closing.withLock { $0.code } }
    /// The reason given to `cancel(with:reason:)`, if any.
    open var closeReason: Data? { closing.withLock { $0.reason } }

    /// The error the task ended with at creation (-1002), or cancellation's.
    private var failure: Error {
        error ?? URLError(.unsupportedURL, userInfo: [NSLocalizedDescriptionKey: Self.notOffered])
    }

    static let notOffered = "WebSocket tasks are not offered: the system's libcurl has no WebSocket support, on which FoundationNetworking runs them"

    /// Hands the task's error to `completionHandler`: nothing is sent.
    open func send(_ message: Message, completionHandler: @escaping @Sendable (Error?) -> Void) {
        let failure = self.failure
        DispatchQueue.global().async { completionHandler(failure) }
    }

    /// Throws the task's error: nothing is sent.
    open func send(_ message: Message) async throws {
        throw failure
    }

    /// Hands the task's error to `completionHandler`: nothing arrives.
    open func receive(completionHandler: @escaping @Sendable (Result<Message, Error>) -> Void) {
        let failure = self.failure
        DispatchQueue.global().async { completionHandler(.failure(failure)) }
    }

    /// Throws the task's error: nothing arrives.
    open func receive() async throws -> Message {
        throw failure
    }

    /// Hands the task's error to `pongReceiveHandler`: no ping is sent.
    open func sendPing(pongReceiveHandler: @escaping @Sendable (Error?) -> Void) {
        let failure = self.failure
        DispatchQueue.global().async { pongReceiveHandler(failure) }
    }

    /// Records the code and reason; the task has ended already, so nothing is sent.
    open func cancel(with closeCode: CloseCode, reason: Data?) {
        closing.withLock { $0 = (closeCode, reason) }
        cancel()
    }
}

/// WebSocket events (Apple's `URLSessionWebSocketDelegate`): never called here, as no
/// WebSocket connection opens (see `URLSessionWebSocketTask`).
public protocol URLSessionWebSocketDelegate: URLSessionTaskDelegate {
    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?)
    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?)
}

extension URLSessionWebSocketDelegate {
    public func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?) {}
    public func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {}
}

extension URLSession {
    /// A WebSocket task for `url`: completed at once with -1002 (`URLSessionWebSocketTask`).
    public func webSocketTask(with url: URL) -> URLSessionWebSocketTask {
        webSocketTask(with: URLRequest(url: url))
    }

    /// A WebSocket task for `url` offering `protocols`: completed at once with -1002.
    public func webSocketTask(with url: URL, protocols: [String]) -> URLSessionWebSocketTask {
        var request = URLRequest(url: url)
        if !protocols.isEmpty { request.setValue(protocols.joined(separator: ", "), forHTTPHeaderField: "Sec-WebSocket-Protocol") }
        return webSocketTask(with: request)
    }

    /// A WebSocket task for `request`: completed at once with -1002, which the delegate's
    /// `didCompleteWithError` also gets.
    public func webSocketTask(with request: URLRequest) -> URLSessionWebSocketTask {
        let failure = TransferFailure(code: TransferFailure.unsupportedURL, message: URLSessionWebSocketTask.notOffered, subject: request.url?.absoluteString)
        return refusedTask(TaskCreation(kind: .download, request: record(of: request)), failure, as: { URLSessionWebSocketTask(record: $0, backend: nil) })
    }
}
