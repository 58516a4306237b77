import Foundation
import Digests

/// An `Authorization` or `Proxy-Authorization` value taken apart (RFC 9110 §11.4): the
/// scheme, then what follows it (a token68 for Basic, auth-params for Digest). A value built
/// on the connection thread.
struct Credentials {
    let scheme: String
    let rest: String

    init?(_ value: String) {
        let trimmed = value.trimmingHTTPWhitespace()
        let name = trimmed.prefix { $0 != " " && $0 != "\t" }
        guard !name.isEmpty, name.utf8.allSatisfy(HTTPRequestParser.isTokenByte) else { return nil }
        scheme = String(name)
        rest = trimmed[name.endIndex...].trimmingHTTPWhitespace()
    }

    func isScheme(_ name: String) -> Bool {
        HTTPHeaders.namesMatch(scheme, name)
    }

    /// The auth-params (`name=token` or `name="quoted string"`, comma-separated), names
    /// lowercased. Nil when the list is malformed or a name repeats (RFC 9110 §11.2).
    var parameters: [String: String]? {
        let bytes = Array(rest.utf8)
        var i = 0
        var result: [String: String] = [:]
        func skipWhitespace() {
            while i < bytes.count, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 }
        }
        func token() -> ArraySlice<UInt8> {
            let start = i
            while i < bytes.count, HTTPRequestParser.isTokenByte(bytes[i]) { i += 1 }
            return bytes[start..<i]
        }
        while true {
            skipWhitespace()
            if i == bytes.count { return result }
            if bytes[i] == UInt8(ascii: ",") {  // empty list elements are allowed
                i += 1
                continue
            }
            let name = token()
            skipWhitespace()
            guard !name.isEmpty, i < bytes.count, bytes[i] == UInt8(ascii: "=") else { return nil }
            i += 1
            skipWhitespace()
            var value: [UInt8] = []
            if i < bytes.count, bytes[i] == UInt8(ascii: "\"") {
                i += 1
                while true {
                    guard i < bytes.count else { return nil }  // unterminated
                    let byte = bytes[i]
                    i += 1
                    if byte == UInt8(ascii: "\"") { break }
                    if byte == UInt8(ascii: "\\") {
                        guard i < bytes.count else { return nil }
                        value.append(bytes[i])
                        i += 1
                    } else {
                        value.append(byte)
                    }
                }
            } else {
                value = Array(token())
                guard !value.isEmpty else { return nil }
            }
            let key = String(decoding: name, as: UTF8.self).lowercased()
            guard result.updateValue(String(decoding: value, as: UTF8.self), forKey: key) == nil else { return nil }
            skipWhitespace()
            guard i == bytes.count || bytes[i] == UInt8(ascii: ",") else { return nil }
        }
    }
}

/// Makes and checks Digest nonces without keeping a table of them: a nonce is its issue time
/// (milliseconds since the epoch, hex) and 64 random bits, followed by a MAC of both (the
/// first 128 bits of SHA-256 over a per-server secret and the two). The `opaque` value is
/// derived from the same secret. Immutable after `init`, so any thread may use it without a lock.
struct NonceSource: Sendable {
    private let secret: String
    /// Sent with every Digest challenge and required back unchanged.
    let opaque: String

    init() {
        var generator = SystemRandomNumberGenerator()
        secret = (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined(separator: "-")
        opaque = String(SHA256.hexDigest(of: Data("opaque:\(secret)".utf8)).prefix(32))
    }

    func make(now: Date = Date()) -> String {
        let payload = Self.hex(UInt64(now.timeIntervalSince1970 * 1000)) + Self.hex(UInt64.random(in: .min ... .max))
        return payload + mac(payload)
    }

    /// When this server issued `nonce`; nil when it did not (forged, altered, or another
    /// server's).
    func issueTime(of nonce: String) -> Date? {
        guard nonce.utf8.count == 64 else { return nil }
        let payload = String(nonce.prefix(32))
        guard nonce.hasSuffix(mac(payload)), let milliseconds = UInt64(payload.prefix(16), radix: 16) else { return nil }
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    private func mac(_ payload: String) -> String {
        String(SHA256.hexDigest(of: Data("\(secret):\(payload)".utf8)).prefix(32))
    }

    /// 16 hex digits, zero-padded.
    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

/// RFC 7616 with `qop=auth`: the challenge a server sends and the response a client must
/// compute. Stateless; callable from any thread.
enum DigestChallenge {
    /// `Digest realm="…", qop="auth", algorithm=…, nonce="…", opaque="…"[, stale=true]`
    static func header(realm: String, algorithm: Protection.DigestAlgorithm, nonce: String, opaque: String,
                       stale: Bool) -> String {
        "Digest realm=\(quoted(realm)), qop=\"auth\", algorithm=\(algorithm.rawValue), "
            + "nonce=\(quoted(nonce)), opaque=\(quoted(opaque))" + (stale ? ", stale=true" : "")
    }

    /// `request-digest` for qop=auth (RFC 7616 §3.4.1):
    /// KD(H(user:realm:password), nonce:nc:cnonce:qop:H(method:uri)), lowercase hex.
    static func response(algorithm: Protection.DigestAlgorithm, user: String, realm: String, password: String,
                         method: String, uri: String, nonce: String, nc: String, cnonce: String,
                         qop: String = "auth") -> String {
        let secret = algorithm.hexDigest(of: "\(user):\(realm):\(password)")
        let request = algorithm.hexDigest(of: "\(method):\(uri)")
        return algorithm.hexDigest(of: "\(secret):\(nonce):\(nc):\(cnonce):\(qop):\(request)")
    }

    /// A quoted-string with `"` and `\` escaped.
    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}

extension Protection.DigestAlgorithm {
    /// The algorithm's lowercase hex digest of the UTF-8 bytes of `text`.
    func hexDigest(of text: String) -> String {
        switch self {
        case .md5: MD5.hexDigest(of: text)
        case .sha256: SHA256.hexDigest(of: Data(text.utf8))
        }
    }
}
