import Foundation

/// Decodes `Decodable` values from JSON: everything `RecordCoding`'s Foundation encoder
/// writes, and what `CompactJSONEncoder` writes, with the same results as Foundation's
/// decoder (dates in ISO 8601, data in Base64, URLs from strings). The text is parsed once,
/// strictly (RFC 8259; see `JSONParser` for what is refused), into tokens that the
/// containers read in place. Integers decode only from integer literals that fit.
///
/// A value with no state; each call has its own document, so it may be used from any thread.
public struct CompactJSONDecoder: Sendable {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try JSONDocument(parsing: data).decode(T.self, at: 0, codingPath: [])
    }
}
