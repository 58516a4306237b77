import Foundation
import TransferContainer

/// Collects the header lines libcurl reports and keeps the head of the last response
/// (redirects and 1xx responses come before it). Owned by its transfer.
struct HTTPResponseHead {
    private(set) var statusCode = 0
    private(set) var fields: [(name: String, value: String)] = []
    /// True once the blank line ending a head was seen.
    private(set) var isComplete = false

    mutating func consume(_ line: String) {
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("HTTP/") {
            // A new response begins (after a redirect or a 1xx): forget the previous head.
            let parts = trimmed.split(separator: " ", maxSplits: 2)
            statusCode = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            fields = []
            isComplete = false
        } else if trimmed.isEmpty {
            isComplete = true
        } else if let colon = trimmed.firstIndex(of: ":") {
            let name = String(trimmed[..<colon]).trimmingCharacters(in: .whitespaces)
            let value = String(trimmed[trimmed.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            fields.append((name, value))
        }
    }

    func value(_ name: String) -> String? {
        fields.last { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var headerDictionary: [String: String] {
        var result: [String: String] = [:]
        for field in fields {
            if let existing = result[field.name] { result[field.name] = existing + ", " + field.value } else { result[field.name] = field.value }
        }
        return result
    }

    var validator: Validator? {
        let tag = value("ETag")
        let date = value("Last-Modified")
        if tag == nil && date == nil { return nil }
        return Validator(entityTag: tag, lastModified: date)
    }

    /// The first byte of a `206` body (`Content-Range: bytes a-b/size`).
    var contentRangeStart: Int64? {
        guard let range = value("Content-Range"), range.hasPrefix("bytes ") else { return nil }
        let spec = range.dropFirst("bytes ".count)
        guard let dash = spec.firstIndex(of: "-") else { return nil }
        return Int64(spec[..<dash])
    }

    /// The full length from `Content-Range: bytes a-b/size`.
    var contentRangeTotal: Int64? {
        guard let range = value("Content-Range"), let slash = range.lastIndex(of: "/") else { return nil }
        return Int64(range[range.index(after: slash)...])
    }

    var contentLength: Int64? { value("Content-Length").flatMap { Int64($0) } }

    /// Seconds a `503` asks the client to wait (`Retry-After`: seconds or an HTTP date).
    var retryAfter: TimeInterval? {
        guard statusCode == 503, let value = value("Retry-After") else { return nil }
        if let seconds = TimeInterval(value.trimmingCharacters(in: .whitespaces)) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value).map { max(0, $0.timeIntervalSinceNow) }
    }
}
