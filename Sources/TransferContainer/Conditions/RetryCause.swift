import Foundation

/// What the last attempt of a task met that makes it wait to try again (S6.4), as a value:
/// the daemon decides by it (`RetryPolicy`), keeps it in the task's record, writes it into
/// its log lines, and `inspect`, `watch` and the timeline show it; nothing reads it back
/// from words. A value type; any thread.
public enum RetryCause: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The server answered `status` (`503`, `429`) with a `Retry-After` of `seconds`.
    case serverAskedToWait(status: Int, seconds: TimeInterval)
    /// Network trouble (refused, dropped, idle timeout): Apple's `URLError` `code`, and what
    /// the transport said.
    case networkTrouble(code: Int, message: String)
    /// The chain of `host:port` failed a transfer yet verified in the trust probe, `count`
    /// times now (servers behind one name that differ).
    case trustDisagreement(host: String, port: Int, count: Int)
    /// A record written before causes were kept: only its words are known.
    case unrecorded(String)

    /// Whether the server itself asked for the wait (`Retry-After`), not the daemon's backoff.
    public var isServerRequest: Bool {
        if case .serverAskedToWait = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .serverAskedToWait(let status, let seconds): "HTTP \(status), Retry-After \(String(format: "%.0f", seconds)) s"
        case .networkTrouble(let code, let message): "\(message) (\(code))"
        case .trustDisagreement(let host, let port, let count): "the chain of \(host):\(port) failed the transfer but verifies in a probe (\(count) times)"
        case .unrecorded(let words): words
        }
    }
}
