import Foundation

/// Encodes `Encodable` values as compact JSON, written straight into bytes while each
/// value's `encode(to:)` runs: members in the order they are encoded (no sorting), dates,
/// data and URLs as `RecordCoding`'s Foundation encoder writes them (ISO 8601 with
/// milliseconds, Base64, the absolute string), `/` unescaped. Foundation's `JSONDecoder`
/// reads what it writes as it reads Foundation's own JSON.
///
/// A value that uses containers out of stack order (none of ours, nor any synthesized
/// conformance: writing to a nested container after a later sibling was started, or using
/// `superEncoder()` after writing more members) cannot be streamed; it is encoded again by
/// `RecordCoding`'s Foundation encoder, which builds a tree first (same JSON, sorted keys).
/// A key encoded twice in one container is written twice (Foundation keeps the last;
/// `CompactJSONDecoder` refuses such an object).
///
/// A value with no state; each call has its own buffer, so it may be used from any thread.
public struct CompactJSONEncoder: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> Data {
        do {
            return Data(try EncodingStream().encode(value))
        } catch EncodingStream.Failure.outOfOrder {
            return try RecordCoding.encoder(pretty: false).encode(value)
        } catch EncodingStream.Failure.misuse(let message, let codingPath) {
            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: codingPath, debugDescription: message))
        }
    }
}
