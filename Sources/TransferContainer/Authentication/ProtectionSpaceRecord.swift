import Foundation

/// Where a credential applies (Apple's `URLProtectionSpace`): a server or proxy, its realm
/// and its authentication scheme. Made by the daemon from a `401`'s `WWW-Authenticate` or a
/// `407`'s `Proxy-Authenticate`. A value type; any thread.
public struct ProtectionSpaceRecord: Codable, Sendable, Hashable {
    /// The HTTP schemes the daemon answers (through libcurl), and server trust: the TLS
    /// chain the server presented, for the app to judge (`NSURLAuthenticationMethodServerTrust`).
    public enum Method: String, Codable, Sendable {
        case basic = "Basic"
        case digest = "Digest"
        case serverTrust = "ServerTrust"
    }

    public var host: String
    public var port: Int
    /// `http` or `https`: the origin's scheme, or the proxy's type for a proxy.
    public var `protocol`: String
    public var realm: String?
    public var method: Method
    /// A proxy's space (`407`), not the origin's (`401`).
    public var isProxy: Bool

    public init(host: String, port: Int, protocol: String, realm: String?, method: Method, isProxy: Bool) {
        self.host = host
        self.port = port
        self.protocol = `protocol`
        self.realm = realm
        self.method = method
        self.isProxy = isProxy
    }

    /// The space a challenge header names for `url` (the origin's, or the proxy's at
    /// `proxy` "host:port"), or nil when it offers no scheme the daemon speaks. Digest is
    /// preferred when both are offered.
    public init?(challenge header: String, url: String, proxy: String?) {
        let offered = Self.challenges(in: header)
        guard let chosen = offered.first(where: { $0.method == .digest }) ?? offered.first,
              let endpoint = proxy.map(Self.endpoint(ofProxy:)) ?? Self.endpoint(of: url) else { return nil }
        // A proxy that tunnels an https URL (CONNECT) is an HTTPS proxy, as Apple types it.
        let scheme = proxy != nil && url.prefix(8).lowercased() == "https://" ? "https" : endpoint.scheme
        self.init(host: endpoint.host, port: endpoint.port, protocol: scheme, realm: chosen.realm, method: chosen.method, isProxy: proxy != nil)
    }

    /// Where a URL connects: its host (lowercased), its port or its scheme's, and its scheme.
    public static func endpoint(of url: String) -> (host: String, port: Int, scheme: String)? {
        guard let components = URLComponents(string: url), let host = components.host, let scheme = components.scheme?.lowercased() else { return nil }
        return (host.lowercased(), components.port ?? (scheme == "https" ? 443 : 80), scheme)
    }

    /// Where a proxy given as "host:port" is (port 1080 when missing); its type is `http`.
    public static func endpoint(ofProxy proxy: String) -> (host: String, port: Int, scheme: String)? {
        let parts = proxy.split(separator: ":")
        guard let host = parts.first else { return nil }
        return (host.lowercased(), parts.count > 1 ? Int(parts[1]) ?? 1080 : 1080, "http")
    }

    /// Whether a credential for this space may be sent on a request to `host`:`port`.
    public func covers(host: String, port: Int, isProxy: Bool) -> Bool {
        self.host == host.lowercased() && self.port == port && self.isProxy == isProxy
    }

    /// The Basic and Digest challenges of a header value, in order, with their realms.
    static func challenges(in header: String) -> [(method: Method, realm: String?)] {
        // Scheme tokens start a challenge: a word followed by a space, at the start or after a comma.
        var result: [(Method, String?)] = []
        let pattern = #"(?:^|,)\s*([A-Za-z][A-Za-z0-9_-]*)\s+(?=[A-Za-z0-9_-]+\s*=)"#
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        let text = header as NSString
        let matches = regex.matches(in: header, range: NSRange(location: 0, length: text.length))
        for (index, match) in matches.enumerated() {
            let scheme = text.substring(with: match.range(at: 1)).lowercased()
            let end = index + 1 < matches.count ? matches[index + 1].range.location : text.length
            let parameters = text.substring(with: NSRange(location: match.range.upperBound, length: end - match.range.upperBound))
            let method: Method? = scheme == "basic" ? .basic : scheme == "digest" ? .digest : nil
            if let method { result.append((method, Self.realm(in: parameters))) }
        }
        return result
    }

    private static func realm(in parameters: String) -> String? {
        guard let range = parameters.range(of: #"realm\s*=\s*"((?:[^"\\]|\\.)*)""#, options: [.regularExpression, .caseInsensitive]) else { return nil }
        let field = String(parameters[range])
        guard let open = field.firstIndex(of: "\"") else { return nil }
        return String(field[field.index(after: open)..<field.index(before: field.endIndex)]).replacingOccurrences(of: "\\\"", with: "\"")
    }
}

/// A credential the app gave (Apple's `URLCredential` for a password): never logged, never
/// shown by inspection, never put in resume data; its description hides the password.
public struct CredentialRecord: Codable, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Apple's `URLCredential.Persistence`.
    public enum Persistence: String, Codable, Sendable {
        /// For this task's request only.
        case none
        /// In the daemon's memory, for the session's tasks, until the daemon exits.
        case forSession
        /// In the app's private container (0600), for every task of the app.
        case permanent
    }

    public var user: String
    public var password: String
    public var persistence: Persistence
    /// For a server-trust challenge (`URLCredential(trust:)`): the accepted server's public
    /// key pin (`ServerTrustRecord.leafPublicKeyPin`); user and password are empty.
    public var serverKeyPin: String?

    public init(user: String, password: String, persistence: Persistence) {
        self.user = user
        self.password = password
        self.persistence = persistence
    }

    /// The answer to a server-trust challenge: this server key, and no other, is trusted.
    public init(acceptingServerKey pin: String) {
        self.init(user: "", password: "", persistence: .forSession)
        serverKeyPin = pin
    }

    public var description: String {
        serverKeyPin.map { "trust in the server key \($0)" } ?? "credential for \(user) (\(persistence.rawValue)), password hidden"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["user": user, "persistence": persistence]) }
}

/// A challenge a task is waiting on an answer for (Apple's `URLAuthenticationChallenge`).
public struct ChallengeRecord: Codable, Sendable, Equatable {
    public var protectionSpace: ProtectionSpaceRecord
    /// How many credentials for this space this task has had refused (Apple's `previousFailureCount`).
    public var previousFailureCount: Int
    /// The user of the credential that was refused, if any (`proposedCredential` without its password).
    public var proposedUser: String?
    /// For a server-trust challenge: what the server presented and how the default
    /// evaluation judged it (Apple's `protectionSpace.serverTrust`).
    public var serverTrust: ServerTrustRecord?

    public init(protectionSpace: ProtectionSpaceRecord, previousFailureCount: Int, proposedUser: String?, serverTrust: ServerTrustRecord? = nil) {
        self.protectionSpace = protectionSpace
        self.previousFailureCount = previousFailureCount
        self.proposedUser = proposedUser
        self.serverTrust = serverTrust
    }

    /// A server-trust challenge for what a server presented (S3.6).
    public init(serverTrust: ServerTrustRecord) {
        self.init(protectionSpace: ProtectionSpaceRecord(host: serverTrust.host, port: serverTrust.port, protocol: "https", realm: nil, method: .serverTrust, isProxy: false),
                  previousFailureCount: 0, proposedUser: nil, serverTrust: serverTrust)
    }
}

/// The app's answer to a challenge (Apple's `URLSession.AuthChallengeDisposition` and credential).
public struct ChallengeAnswer: Codable, Sendable, Equatable {
    public enum Disposition: String, Codable, Sendable {
        case useCredential
        case performDefaultHandling
        case cancelAuthenticationChallenge
        case rejectProtectionSpace
    }

    public var disposition: Disposition
    public var credential: CredentialRecord?

    public init(disposition: Disposition, credential: CredentialRecord?) {
        self.disposition = disposition
        self.credential = credential
    }
}
