/// An optional record field kept behind a reference, for values most records do not have
/// (a task's pending challenge, its failure, its response…): the record then holds one
/// pointer where the value would take tens or hundreds of bytes, in each of the daemon's
/// hundreds of thousands of records. Reads and writes like the optional itself; its JSON is
/// the optional's (a nil value is left out, a missing or null member reads as nil). A value
/// type (the box is never changed once made); any thread.
@propertyWrapper
public struct Indirect<Value: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    private var box: Box?

    public init(wrappedValue: Value?) {
        box = wrappedValue.map(Box.init)
    }

    public var wrappedValue: Value? {
        get { box?.value }
        set { box = newValue.map(Box.init) }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        box = container.decodeNil() ? nil : Box(try container.decode(Value.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let value = box?.value { try container.encode(value) } else { try container.encodeNil() }
    }

    public static func == (left: Indirect, right: Indirect) -> Bool {
        left.wrappedValue == right.wrappedValue
    }

    private final class Box: Sendable {
        let value: Value
        init(_ value: Value) {
            self.value = value
        }
    }
}

extension KeyedDecodingContainer {
    /// What synthesized decoding calls for an `@Indirect` field: as for an optional, a
    /// missing or null member is nil.
    func decode<Value>(_ type: Indirect<Value>.Type, forKey key: Key) throws -> Indirect<Value> {
        Indirect(wrappedValue: try decodeIfPresent(Value.self, forKey: key))
    }
}

extension KeyedEncodingContainer {
    /// What synthesized encoding calls for an `@Indirect` field: as for an optional, nil
    /// is left out.
    mutating func encode<Value>(_ value: Indirect<Value>, forKey key: Key) throws {
        try encodeIfPresent(value.wrappedValue, forKey: key)
    }
}
