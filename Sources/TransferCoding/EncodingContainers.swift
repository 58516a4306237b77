/// The `Encoder` one value's `encode(to:)` is given: the value's level in the stream. A
/// small value (no allocation as an existential); valid during that call.
struct ValueEncoder: Encoder {
    let stream: EncodingStream
    let slot: EncodingStream.Slot

    var codingPath: [any CodingKey] { stream.codingPath(to: slot.depth) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        stream.open(slot, as: .keyed)
        return KeyedEncodingContainer(KeyedStreamContainer<Key>(stream: stream, slot: slot))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        stream.open(slot, as: .unkeyed)
        return UnkeyedStreamContainer(stream: stream, slot: slot)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        stream.open(slot, as: .single)
        return SingleValueStreamContainer(stream: stream, slot: slot)
    }
}

/// An object being written: each member goes out as `"key":value` when it is encoded. Names
/// its level in the stream; used by the `encode(to:)` that asked for it.
struct KeyedStreamContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let stream: EncodingStream
    let slot: EncodingStream.Slot

    var codingPath: [any CodingKey] { stream.codingPath(to: slot.depth) }

    mutating func encodeNil(forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write("null") }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(value ? "true" : "false") }
    mutating func encode(_ value: String, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(string: value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try encode(float: value, forKey: key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try encode(float: value, forKey: key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try stream.beginMember(slot, key: key); stream.writer.write(integer: value) }

    private func encode<Float: BinaryFloatingPoint & LosslessStringConvertible>(float value: Float, forKey key: Key) throws {
        try stream.checkFinite(value, at: codingPath + [key])
        try stream.beginMember(slot, key: key)
        stream.writer.write(finite: value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try stream.encode(value, at: .member(key), in: slot)
    }

    // Without the protocol's default, which looks up `Optional<T>`'s metadata on every call.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try stream.encode(value, at: .member(key), in: slot) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedStreamContainer<NestedKey>(stream: stream, slot: stream.nested(.keyed, in: slot, key: key)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        UnkeyedStreamContainer(stream: stream, slot: stream.nested(.unkeyed, in: slot, key: key))
    }

    mutating func superEncoder() -> any Encoder {
        ValueEncoder(stream: stream, slot: stream.nested(.value, in: slot, key: JSONKey.super))
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        ValueEncoder(stream: stream, slot: stream.nested(.value, in: slot, key: key))
    }
}

/// An array being written, element by element. Names its level in the stream; used by the
/// `encode(to:)` that asked for it.
struct UnkeyedStreamContainer: UnkeyedEncodingContainer {
    let stream: EncodingStream
    let slot: EncodingStream.Slot

    var codingPath: [any CodingKey] { stream.codingPath(to: slot.depth) }
    var count: Int { stream.count(slot) }

    mutating func encodeNil() throws { try stream.beginElement(slot); stream.writer.write("null") }
    mutating func encode(_ value: Bool) throws { try stream.beginElement(slot); stream.writer.write(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { try stream.beginElement(slot); stream.writer.write(string: value) }
    mutating func encode(_ value: Double) throws { try encode(float: value) }
    mutating func encode(_ value: Float) throws { try encode(float: value) }
    mutating func encode(_ value: Int) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int8) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int16) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int32) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int64) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt8) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt16) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt32) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt64) throws { try stream.beginElement(slot); stream.writer.write(integer: value) }

    private func encode<Float: BinaryFloatingPoint & LosslessStringConvertible>(float value: Float) throws {
        try stream.checkFinite(value, at: codingPath + [JSONKey(index: count)])
        try stream.beginElement(slot)
        stream.writer.write(finite: value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try stream.encode(value, at: .element, in: slot)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(KeyedStreamContainer<NestedKey>(stream: stream, slot: stream.nested(.keyed, in: slot, key: nil)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedStreamContainer(stream: stream, slot: stream.nested(.unkeyed, in: slot, key: nil))
    }

    mutating func superEncoder() -> any Encoder {
        ValueEncoder(stream: stream, slot: stream.nested(.value, in: slot, key: nil))
    }
}

/// The one value of a value that encodes as a scalar (a raw-value enum, a checked name,
/// `Optional`), or as another value in its place. Names its level in the stream.
struct SingleValueStreamContainer: SingleValueEncodingContainer {
    let stream: EncodingStream
    let slot: EncodingStream.Slot

    var codingPath: [any CodingKey] { stream.codingPath(to: slot.depth) }

    mutating func encodeNil() throws { try stream.beginSingle(slot); stream.writer.write("null") }
    mutating func encode(_ value: Bool) throws { try stream.beginSingle(slot); stream.writer.write(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { try stream.beginSingle(slot); stream.writer.write(string: value) }
    mutating func encode(_ value: Double) throws { try encode(float: value) }
    mutating func encode(_ value: Float) throws { try encode(float: value) }
    mutating func encode(_ value: Int) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int8) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int16) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int32) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: Int64) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt8) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt16) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt32) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }
    mutating func encode(_ value: UInt64) throws { try stream.beginSingle(slot); stream.writer.write(integer: value) }

    private func encode<Float: BinaryFloatingPoint & LosslessStringConvertible>(float value: Float) throws {
        try stream.checkFinite(value, at: codingPath)
        try stream.beginSingle(slot)
        stream.writer.write(finite: value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try stream.encode(value, at: .single, in: slot)
    }
}
