import Foundation

/// A parsed request line and header fields (the body is read separately, see
/// `RequestBodyReader`). Built and used on one connection thread.
struct RequestHead: Sendable {
    var method: String
    /// The request target exactly as sent, e.g. `/a%20b?x=1`.
    var target: String
    /// The target's path, percent-decoded and without the query: what routes are keyed by.
    var path: String
    var query: String?
    /// The scheme and authority of an absolute-form target (`http://127.0.0.1:8080/p`, as
    /// clients send to a proxy), lowercased and without userinfo; nil for origin form and `*`.
    var scheme: String? = nil
    var authority: String? = nil
    var version: HTTPVersion
    var headers: HTTPHeaders

    /// Whether the client lets the connection stay open after this exchange
    /// (HTTP/1.1: unless `Connection: close`; HTTP/1.0: only with `Connection: keep-alive`).
    var wantsKeepAlive: Bool {
        let tokens = headers.tokens(for: "Connection")
        if tokens.contains("close") { return false }
        return version.minor >= 1 || tokens.contains("keep-alive")
    }

    /// `Expect: 100-continue` from an HTTP/1.1 client.
    var expectsContinue: Bool {
        version.minor >= 1 && headers.tokens(for: "Expect").contains("100-continue")
    }
}

/// An HTTP/1.x protocol version.
struct HTTPVersion: Sendable, Equatable, CustomStringConvertible {
    var major: Int
    var minor: Int

    var description: String { "HTTP/\(major).\(minor)" }
}

/// Why a request head was rejected; maps to the status the client gets before the
/// connection is closed.
enum HTTPParseError: Error, Equatable {
    /// 400: the head is not valid HTTP/1.x.
    case malformed(String)
    /// 505: well-formed, but not HTTP/1.x.
    case unsupportedVersion

    var status: Int {
        switch self {
        case .malformed: 400
        case .unsupportedVersion: 505
        }
    }
}

/// Parses request heads (RFC 9112 §2–§5) strictly enough that smuggling-style ambiguity
/// is rejected rather than guessed at. Stateless; callable from any thread.
enum HTTPRequestParser {
    /// Parses the bytes `SocketReader.readHead` returned (request line through blank line).
    static func parseHead(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> RequestHead {
        var lines = try splitLines(bytes)
        guard !lines.isEmpty else { throw .malformed("empty request") }
        let requestLine = lines.removeFirst()

        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("request line needs method, target and version") }
        guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { throw .malformed("bad method") }
        guard !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { throw .malformed("bad target") }
        let version = try parseVersion(parts[2])

        var headers = HTTPHeaders()
        for line in lines {
            guard let first = line.first else { continue }
            if first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                throw .malformed("obsolete line folding")
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .malformed("header without colon") }
            let name = line[line.startIndex..<colon]
            // No whitespace between name and colon (RFC 9112 §5.1): a classic smuggling vector.
            guard !name.isEmpty, name.allSatisfy(isTokenByte) else { throw .malformed("bad header name") }
            let value = line[(colon + 1)...]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }) else {
                throw .malformed("control character in header value")
            }
            headers.append(name: String(decoding: name, as: UTF8.self),
                           value: String(decoding: value, as: UTF8.self).trimmingHTTPWhitespace())
        }
        if version.minor >= 1 && headers.values(for: "Host").count != 1 {
            throw .malformed("HTTP/1.1 needs exactly one Host")  // RFC 9112 §3.2
        }

        let target = String(decoding: parts[1], as: UTF8.self)
        let split = try splitTarget(target)
        return RequestHead(method: String(decoding: parts[0], as: UTF8.self), target: target,
                           path: split.path, query: split.query, scheme: split.scheme, authority: split.authority,
                           version: version, headers: headers)
    }

    /// Splits on LF, dropping each line's CR. A CR anywhere else is malformed.
    private static func splitLines(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        for var line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.contains(UInt8(ascii: "\r")) { throw .malformed("bare CR") }
            if line.isEmpty { break }  // the blank line ending the head
            lines.append(line)
        }
        return lines
    }

    private static func parseVersion(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPVersion {
        let text = Array(bytes)
        guard text.count == 8, text.starts(with: Array("HTTP/".utf8)), text[6] == UInt8(ascii: "."),
              let major = digit(text[5]), let minor = digit(text[7]) else {
            throw .malformed("bad version")
        }
        guard major == 1 else { throw .unsupportedVersion }
        return HTTPVersion(major: major, minor: minor)
    }

    /// A request target taken apart: the percent-decoded path (what routes are keyed by), the
    /// query as sent, and for absolute form the lowercased scheme and authority.
    struct Target: Equatable {
        var path: String
        var query: String?
        var scheme: String?
        var authority: String?
    }

    /// Origin form (`/p?q`), absolute form (`http://host/p?q`, scheme in any case) or `*`.
    /// Also used for a Digest `uri`, which repeats the request target.
    static func splitTarget(_ target: String) throws(HTTPParseError) -> Target {
        var rest = Substring(target)
        if target == "*" { return Target(path: "*") }
        var scheme: String?, authority: String?
        if !rest.hasPrefix("/") {
            guard let separator = rest.range(of: "://"),
                  ["http", "https"].contains(rest[..<separator.lowerBound].lowercased()) else {
                throw .malformed("bad target")
            }
            scheme = rest[..<separator.lowerBound].lowercased()
            rest = rest[separator.upperBound...]
            let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            let hostPort = rest[..<end].split(separator: "@", omittingEmptySubsequences: false).last ?? ""
            guard !hostPort.isEmpty else { throw .malformed("absolute target without a host") }
            authority = hostPort.lowercased()
            rest = rest[end...]
            if !rest.hasPrefix("/") { rest = Substring("/" + rest) }
        }
        let query = rest.firstIndex(of: "?").map { String(rest[rest.index(after: $0)...]) }
        let rawPath = rest.prefix { $0 != "?" }
        guard let path = rawPath.removingPercentEncoding else { throw .malformed("bad percent-encoding") }
        return Target(path: path, query: query, scheme: scheme, authority: authority)
    }

    private static func digit(_ byte: UInt8) -> Int? {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int(byte - UInt8(ascii: "0")) : nil
    }

    /// RFC 9110 §5.6.2 tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
