import Foundation

/// One request as the server saw it. Recorded by the connection thread after the request's
/// head and body were read and before the response is written, so a client that has its
/// response can rely on the request being in `LoopbackServer.requests`. Requests on upload
/// routes and resume paths are recorded even when their body was cut off (by the client or
/// a drop fault); `bodyLength` is then what arrived. Immutable.
public struct RecordedRequest: Sendable {
    /// The method, e.g. `GET`, `PUT`, `PATCH`.
    public let method: String
    /// The request target exactly as sent, e.g. `/a%20b?x=1`.
    public let target: String
    /// The percent-decoded path without the query, e.g. `/a b`.
    public let path: String
    /// The query after `?`, as sent; nil without one.
    public let query: String?
    /// `HTTP/1.1` or `HTTP/1.0`.
    public let httpVersion: String
    /// The request's header fields, in order.
    public let headers: HTTPHeaders
    /// Decoded length of the request body (0 without one, or when it was not read because
    /// the answer came first).
    public let bodyLength: Int64
    /// The body's bytes, for a request to a route (not an upload route) whose body was read
    /// whole and is at most `keptBodyLimit` long; nil otherwise.
    public var body: Data? = nil
    /// Longest body `body` keeps.
    public static let keptBodyLimit = 2 << 20
    /// Which connection carried it: equal IDs mean a reused (keep-alive) connection.
    public let connectionID: Int
    /// When the request had been read.
    public let time: Date

    /// The named header's value, case-insensitively; nil when absent.
    public func header(_ name: String) -> String? {
        headers[name]
    }
}

/// The server's record of traffic: every request in arrival order and the body bytes sent.
/// Part of `ServerState`, so guarded by the server lock.
struct RequestLog {
    private(set) var requests: [RecordedRequest] = []
    var bodyBytesSent: Int64 = 0

    mutating func append(_ request: RecordedRequest) {
        requests.append(request)
    }
}
