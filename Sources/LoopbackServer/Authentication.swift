import Foundation

/// HTTP authentication for a protected path prefix (`LoopbackServer.protect(_:with:)`) or for
/// the server acting as a proxy (`requireProxyAuthentication(_:)`): the scheme, the realm and
/// the accepted user/password pairs. A plain value, copied into the server's protection table
/// under the server lock; protecting the same prefix again replaces it.
public struct Protection: Sendable, Equatable {
    /// How credentials are sent.
    public enum Scheme: Sendable, Equatable {
        /// RFC 7617: `Basic realm="…", charset="UTF-8"`; the client sends user:password in base64.
        case basic
        /// RFC 7616 with `qop="auth"`: the client proves it knows the password for a nonce
        /// the server chose. One algorithm per protection.
        case digest(DigestAlgorithm)

        /// `Basic` or `Digest`, as in the header fields.
        public var name: String {
            switch self {
            case .basic: "Basic"
            case .digest: "Digest"
            }
        }
    }

    /// Digest's hash algorithms (the `-sess` variants are not offered).
    public enum DigestAlgorithm: String, Sendable, CaseIterable {
        /// Plain Swift MD5 (see `MD5`), still the default of most clients.
        case md5 = "MD5"
        /// `SHA256`, by libcrypto.
        case sha256 = "SHA-256"
    }

    /// How credentials are sent: Basic, or Digest with one algorithm.
    public var scheme: Scheme
    /// The realm named in the challenge, which a client's protection space carries.
    public var realm: String
    /// Accepted passwords by user name.
    public var users: [String: String]
    /// Digest only: how long a nonce stays good. A request with right credentials for an
    /// older nonce gets the challenge again with `stale=true` and a fresh nonce, so the client
    /// retries without asking for the password. Nil: nonces never expire.
    public var nonceLifetime: TimeInterval?

    /// A protection with `scheme`, `realm` and the accepted `users` (user name → password).
    public init(_ scheme: Scheme, realm: String = "LoopbackServer", users: [String: String],
                nonceLifetime: TimeInterval? = nil) {
        self.scheme = scheme
        self.realm = realm
        self.users = users
        self.nonceLifetime = nonceLifetime
    }

    /// Basic authentication for `users` (user name → password).
    public static func basic(realm: String = "LoopbackServer", users: [String: String]) -> Protection {
        Protection(.basic, realm: realm, users: users)
    }

    /// Digest authentication with `algorithm` for `users`; see `nonceLifetime`.
    public static func digest(_ algorithm: DigestAlgorithm = .md5, realm: String = "LoopbackServer",
                              users: [String: String], nonceLifetime: TimeInterval? = nil) -> Protection {
        Protection(.digest(algorithm), realm: realm, users: users, nonceLifetime: nonceLifetime)
    }
}

/// One authentication decision: a request to a protected path (or through the server as a
/// proxy) was challenged, turned away, told its nonce is stale, or let in as a user.
/// Recorded by the connection thread before the answer is written, so a client that has its
/// response can rely on the event being in `LoopbackServer.authenticationLog`. Immutable.
public struct AuthenticationEvent: Sendable, Equatable {
    /// What the server decided.
    public enum Outcome: Sendable, Equatable {
        /// The request carried no credentials: answered 401/407 with a challenge.
        case challenged
        /// The credentials did not verify (unknown user, wrong password, another scheme or
        /// realm, a malformed field): answered 401/407 with a challenge again. `reason` says which.
        case rejected(reason: String)
        /// Digest with the right password for a nonce that expired (or that this server did not
        /// issue): answered 401/407 with `stale=true`.
        case stale
        /// The credentials verified; the request went on to its route.
        case accepted(user: String)
    }

    /// What the server decided about the request.
    public let outcome: Outcome
    /// True for `Proxy-Authorization` / 407, false for `Authorization` / 401.
    public let proxy: Bool
    /// 401 or 407 when the request was answered with a challenge; nil when it was accepted.
    public let status: Int?
    /// The scheme of the protection that applied.
    public let scheme: Protection.Scheme
    /// The realm of the protection that applied.
    public let realm: String
    /// The protected prefix that applied; nil for proxy authentication.
    public let protectedPrefix: String?
    /// The request's method.
    public let method: String
    /// The request target as sent (absolute form when it came through the proxy).
    public let target: String
    /// The percent-decoded path without the query.
    public let path: String
    /// The `Authorization` (or `Proxy-Authorization`) value as received; nil when absent.
    public let credentials: String?
    /// The connection the request came on, numbered from 1 in the order they were accepted.
    public let connectionID: Int
    /// When the decision was made.
    public let time: Date
}

/// What `LoopbackServer.authenticationCounts(at:proxy:)` adds up for one path.
public struct AuthenticationCounts: Sendable, Equatable {
    /// Answers with a challenge (401 or 407): first challenges, rejections and stale nonces.
    public var challenges = 0
    /// Of those, requests whose credentials did not verify (`Outcome.rejected`).
    public var failures = 0
    /// Of those, stale Digest nonces (`Outcome.stale`).
    public var stale = 0
    /// The user of each accepted request, in order.
    public var acceptedUsers: [String] = []

    /// Counts as given; `authenticationCounts(at:proxy:)` makes them from the log.
    public init(challenges: Int = 0, failures: Int = 0, stale: Int = 0, acceptedUsers: [String] = []) {
        self.challenges = challenges
        self.failures = failures
        self.stale = stale
        self.acceptedUsers = acceptedUsers
    }

    init(_ events: some Sequence<AuthenticationEvent>) {
        for event in events {
            switch event.outcome {
            case .challenged: challenges += 1
            case .rejected:
                challenges += 1
                failures += 1
            case .stale:
                challenges += 1
                stale += 1
            case .accepted(let user): acceptedUsers.append(user)
            }
        }
    }
}

/// Protected prefixes, the proxy protection and the authentication log. Part of
/// `ServerState`, so guarded by the server lock.
struct AuthenticationRegistry {
    /// Keyed by prefix, normalized like route paths (leading `/`, no query).
    var protections: [String: Protection] = [:]
    /// Set: absolute-form requests must carry `Proxy-Authorization`.
    var proxy: Protection?
    private(set) var events: [AuthenticationEvent] = []

    mutating func append(_ event: AuthenticationEvent) {
        events.append(event)
    }

    /// The protection for `path`: that of the longest protected prefix covering it. A prefix
    /// covers whole path segments: `/a` covers `/a` and `/a/b`, not `/ab`; `/` covers all.
    func protection(for path: String) -> (prefix: String, protection: Protection)? {
        protections
            .filter { prefix, _ in Self.covers(prefix, path) }
            .max { $0.key.count < $1.key.count }
            .map { ($0.key, $0.value) }
    }

    static func covers(_ prefix: String, _ path: String) -> Bool {
        guard path.hasPrefix(prefix) else { return false }
        return prefix.hasSuffix("/") || path.count == prefix.count
            || path[path.index(path.startIndex, offsetBy: prefix.count)] == "/"
    }
}
