import HTTPFormats
/// What to send in answer to a GET's `Range` and `If-Range` headers (RFC 9110 §14),
/// decided from the headers and the representation's size and validators. A pure value
/// computed on the connection thread.
enum RangeDecision: Equatable {
    /// 200 with the whole body: no Range, an unusable Range, several ranges, or an
    /// If-Range that does not match.
    case whole
    /// 206 with these bytes (inclusive bounds).
    case partial(ClosedRange<Int64>)
    /// 416 with `Content-Range: bytes */size`.
    case unsatisfiable

    static func decide(range: String?, ifRange: String?, size: Int64,
                       etag: String?, lastModified: Int?) -> RangeDecision {
        guard let range, let spec = ByteRangeSpec(range) else { return .whole }
        if let ifRange, !IfRangeCondition(ifRange).matches(etag: etag, lastModified: lastModified) {
            return .whole
        }
        guard let bytes = spec.resolve(size: size) else { return .unsatisfiable }
        return .partial(bytes)
    }
}

/// One `bytes=` range as written in a `Range` header, before the size is known.
enum ByteRangeSpec: Equatable {
    /// `bytes=a-b`
    case closed(Int64, Int64)
    /// `bytes=a-`
    case from(Int64)
    /// `bytes=-n`: the last n bytes.
    case suffix(Int64)

    /// Nil for anything but a single syntactically valid byte range; the server then
    /// ignores the header, as RFC 9110 §14.2 allows (several ranges included).
    init?(_ header: String) {
        let trimmed = header.trimmingHTTPWhitespace()
        guard let equals = trimmed.firstIndex(of: "="),
              trimmed[..<equals].trimmingHTTPWhitespace().lowercased() == "bytes" else { return nil }
        let set = trimmed[trimmed.index(after: equals)...].trimmingHTTPWhitespace()
        guard !set.contains(","), let dash = set.firstIndex(of: "-") else { return nil }
        let first = set[..<dash].trimmingHTTPWhitespace()
        let last = set[set.index(after: dash)...].trimmingHTTPWhitespace()
        switch (Self.number(first), Self.number(last)) {
        case (.some(let a), .some(let b)) where a <= b: self = .closed(a, b)
        case (.some(let a), nil) where last.isEmpty: self = .from(a)
        case (nil, .some(let n)) where first.isEmpty: self = .suffix(n)
        default: return nil
        }
    }

    /// The inclusive byte bounds within a body of `size` bytes, or nil if unsatisfiable.
    func resolve(size: Int64) -> ClosedRange<Int64>? {
        switch self {
        case .closed(let a, let b):
            return a < size ? a...min(b, size - 1) : nil
        case .from(let a):
            return a < size ? a...(size - 1) : nil
        case .suffix(let n):
            return n > 0 && size > 0 ? max(0, size - n)...(size - 1) : nil
        }
    }

    /// Decimal digits only; values past Int64 saturate (they are beyond any size anyway).
    private static func number(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int64(text) ?? .max
    }
}

/// An `If-Range` header: an entity tag or an HTTP-date (RFC 9110 §13.1.5).
enum IfRangeCondition: Equatable {
    case entityTag(String)
    case date(Int)
    case invalid

    init(_ header: String) {
        let value = header.trimmingHTTPWhitespace()
        if value.hasPrefix("\"") || value.hasPrefix("W/") {
            self = .entityTag(value)
        } else if let seconds = HTTPDate.parse(value) {
            self = .date(seconds)
        } else {
            self = .invalid
        }
    }

    /// Entity tags compare strongly (weak tags never match); dates must equal
    /// Last-Modified exactly. Anything else means "send the whole body".
    func matches(etag: String?, lastModified: Int?) -> Bool {
        switch self {
        case .entityTag(let tag):
            guard let etag, !tag.hasPrefix("W/"), !etag.hasPrefix("W/") else { return false }
            return tag == etag
        case .date(let seconds):
            return lastModified == seconds
        case .invalid:
            return false
        }
    }
}
