import Foundation
import TransferContainer

/// Collects the header lines libcurl reports and keeps the head of the last response
/// (redirects and 1xx responses come before it). Owned by its transfer.
package struct HTTPResponseHead {
    private(set) var statusCode = 0
    private(set) var fields: [(name: String, value: String)] = []
    /// True once the blank line ending a head was seen.
    private(set) var isComplete = false

    /// Takes one header line (its CR LF already gone). The line is split on its bytes:
    /// this runs for every line of every response.
    package mutating func consume(_ line: String) {
        let bytes = Array(line.utf8)
        let trimmed = Self.trimmed(bytes[...])
        if trimmed.starts(with: "HTTP/".utf8) {
            // A new response begins (after a redirect or a 1xx): forget the previous head.
            let parts = trimmed.split(separator: UInt8(ascii: " "), maxSplits: 2)
            statusCode = parts.count > 1 ? Int(Self.text(parts[1])) ?? 0 : 0
            fields = []
            isComplete = false
        } else if trimmed.isEmpty {
            isComplete = true
        } else if let colon = trimmed.firstIndex(of: UInt8(ascii: ":")) {
            let name = Self.text(Self.trimmed(trimmed[..<colon]))
            let value = Self.text(Self.trimmed(trimmed[(colon + 1)...]))
            fields.append((name, value))
        }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        var result = bytes
        while let first = result.first, isSpace(first) { result = result.dropFirst() }
        while let last = result.last, isSpace(last) { result = result.dropLast() }
        return result
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The last value of the field `name`; names compare without regard to ASCII case.
    package func value(_ name: String) -> String? {
        fields.last { $0.name.isSameHTTPFieldName(as: name) }?.value
    }

    /// Every value of the field `name`, in order (`Set-Cookie` comes once per cookie).
    package func values(_ name: String) -> [String] {
        fields.filter { $0.name.isSameHTTPFieldName(as: name) }.map(\.value)
    }

    package var headerDictionary: [String: String] {
        var result: [String: String] = [:]
        for field in fields {
            if let existing = result[field.name] { result[field.name] = existing + ", " + field.value } else { result[field.name] = field.value }
        }
        return result
    }

    package var validator: Validator? {
        let tag = value("ETag")
        let date = value("Last-Modified")
        if tag == nil && date == nil { return nil }
        return Validator(entityTag: tag, lastModified: date)
    }

    /// The first byte of a `206` body (`Content-Range: bytes a-b/size`).
    package var contentRangeStart: Int64? {
        guard let range = value("Content-Range"), range.hasPrefix("bytes ") else { return nil }
        let spec = range.dropFirst("bytes ".count)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        return Self.byteCount(spec[..<dash])
    }

    /// The full length from `Content-Range: bytes a-b/size`.
    package var contentRangeTotal: Int64? {
        guard let range = value("Content-Range"), let slash = range.lastIndex(of: "/") else { return nil }
        return Self.byteCount(range[range.index(after: slash)...])
    }

    package var contentLength: Int64? { value("Content-Length").flatMap { Self.byteCount($0[...]) } }

    /// A count of bytes a server sent, within what a file can hold; nil for anything else.
    private static func byteCount(_ text: Substring) -> Int64? {
        Int64(text).flatMap { CheckedNumbers.check($0, in: 0...CheckedNumbers.byteCounts.upperBound) }
    }

    /// Whether this response asks to be tried again later, and why (`RetryPolicy.serverWait`).
    package func serverWait(now: Date) -> RetryCause? {
        RetryPolicy.serverWait(status: statusCode, retryAfter: value("Retry-After"), now: now)
    }
}
