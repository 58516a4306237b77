import Foundation

/// A server key an app accepted in a server-trust challenge (S3.6), for one origin of one
/// session, as the session's record (`session.json`) keeps it: a restarted daemon trusts it
/// as the daemon that was asked did, and does not ask again. A value; the daemon's loop
/// thread changes a session's list.
public struct AcceptedServerKey: Codable, Sendable, Equatable {
    public var scheme: String
    public var host: String
    public var port: Int
    /// "sha256//" and the Base64 SHA-256 of the leaf's SubjectPublicKeyInfo (libcurl's pin form).
    public var pin: String

    /// The most a session keeps: past it the oldest acceptance is forgotten, and that server's
    /// chain is put to the app again the next time it does not verify.
    public static let limitPerSession = 32

    public init(scheme: String, host: String, port: Int, pin: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.pin = pin
    }

    /// Whether this acceptance is for the origin `scheme://host:port`. A pin not of the form
    /// the daemon writes covers nothing: libcurl would take other text for a file to read.
    public func covers(scheme: String, host: String, port: Int) -> Bool {
        self.scheme == scheme && self.host == host && self.port == port && isWellFormed
    }

    private var isWellFormed: Bool {
        let digest = pin.dropFirst("sha256//".count)
        return pin.hasPrefix("sha256//") && digest.count == 44 && Data(base64Encoded: String(digest)) != nil
    }

    /// `keys` with `key` as the latest acceptance for its origin (replacing an older one
    /// there), oldest first, at most `limitPerSession`.
    public static func adding(_ key: AcceptedServerKey, to keys: [AcceptedServerKey]) -> [AcceptedServerKey] {
        var kept = keys.filter { !($0.scheme == key.scheme && $0.host == key.host && $0.port == key.port) }
        kept.append(key)
        return Array(kept.suffix(limitPerSession))
    }
}
