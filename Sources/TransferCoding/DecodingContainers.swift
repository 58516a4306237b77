/// The scalar types every decoding container decodes the same way, each from its own kind of
/// token; lets the containers' many overloads share one implementation each.
protocol JSONScalar {
    static func decode(_ token: Int, in document: JSONDocument, codingPath: @autoclosure () -> [any CodingKey]) throws -> Self
}

extension Bool: JSONScalar {
    static func decode(_ token: Int, in document: JSONDocument, codingPath: @autoclosure () -> [any CodingKey]) throws -> Bool {
        try document.bool(at: token, codingPath: codingPath())
    }
}

extension String: JSONScalar {
    static func decode(_ token: Int, in document: JSONDocument, codingPath: @autoclosure () -> [any CodingKey]) throws -> String {
        try document.string(at: token, codingPath: codingPath())
    }
}

extension JSONScalar where Self: FixedWidthInteger {
    static func decode(_ token: Int, in document: JSONDocument, codingPath: @autoclosure () -> [any CodingKey]) throws -> Self {
        try document.integer(at: token, codingPath: codingPath())
    }
}

extension JSONScalar where Self: BinaryFloatingPoint & LosslessStringConvertible {
    static func decode(_ token: Int, in document: JSONDocument, codingPath: @autoclosure () -> [any CodingKey]) throws -> Self {
        try document.floatingPoint(at: token, codingPath: codingPath())
    }
}

extension Double: JSONScalar {}
extension Float: JSONScalar {}
extension Int: JSONScalar {}
extension Int8: JSONScalar {}
extension Int16: JSONScalar {}
extension Int32: JSONScalar {}
extension Int64: JSONScalar {}
extension UInt: JSONScalar {}
extension UInt8: JSONScalar {}
extension UInt16: JSONScalar {}
extension UInt32: JSONScalar {}
extension UInt64: JSONScalar {}

/// The `Decoder` one value's `init(from:)` is given: a token of the document. A small value
/// (no allocation as an existential).
struct TokenDecoder: Decoder {
    let document: JSONDocument
    let token: Int
    /// For `superDecoder(forKey:)` under a key the object does not have (the token is then
    /// the document's `absent` null, which has no path of its own).
    var absentPath: [any CodingKey]? = nil

    var codingPath: [any CodingKey] { absentPath ?? document.codingPath(to: token) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard document.tokens[token].kind == .object else { throw document.mismatch([String: Any].self, at: token, codingPath: codingPath) }
        return KeyedDecodingContainer(KeyedTokenContainer<Key>(document: document, object: token))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard document.tokens[token].kind == .array else { throw document.mismatch([Any].self, at: token, codingPath: codingPath) }
        return UnkeyedTokenContainer(document: document, array: token)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueTokenContainer(decoder: self)
    }
}

/// An object's members, found by name through the document's name index; names the
/// container's type does not know are ignored.
struct KeyedTokenContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let document: JSONDocument
    let object: Int

    var codingPath: [any CodingKey] { document.codingPath(to: object) }
    var allKeys: [Key] { document.memberKeys(of: object) }

    func contains(_ key: Key) -> Bool { document.member(key.stringValue, in: object) != nil }

    private func value(_ key: Key) throws -> Int {
        guard let token = document.member(key.stringValue, in: object) else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
        }
        return token
    }

    /// The member's value, nil when it is missing or null.
    private func present(_ key: Key) -> Int? {
        guard let token = document.member(key.stringValue, in: object), !document.isNull(token) else { return nil }
        return token
    }

    private func scalar<T: JSONScalar>(_ key: Key) throws -> T {
        try T.decode(value(key), in: document, codingPath: codingPath + [key])
    }

    private func scalarIfPresent<T: JSONScalar>(_ key: Key) throws -> T? {
        guard let token = present(key) else { return nil }
        return try T.decode(token, in: document, codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { document.isNull(try value(key)) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try scalar(key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try scalar(key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try scalar(key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try scalar(key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try scalar(key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try scalar(key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try scalar(key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try scalar(key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try scalar(key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try scalar(key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try scalar(key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try scalar(key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try scalar(key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try scalar(key) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try document.decode(T.self, at: value(key), codingPath: codingPath + [key])
    }

    // One lookup each, where the protocol's defaults make three.
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try scalarIfPresent(key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try scalarIfPresent(key) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let token = present(key) else { return nil }
        return try document.decode(T.self, at: token, codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try TokenDecoder(document: document, token: value(key)).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try TokenDecoder(document: document, token: value(key)).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { superDecoder(named: JSONKey.super) }
    func superDecoder(forKey key: Key) throws -> any Decoder { superDecoder(named: key) }

    /// The member's value, or null when there is none (as Foundation).
    private func superDecoder(named key: some CodingKey) -> TokenDecoder {
        guard let token = document.member(key.stringValue, in: object) else {
            return TokenDecoder(document: document, token: document.absent, absentPath: codingPath + [key])
        }
        return TokenDecoder(document: document, token: token)
    }
}

/// An array's elements, in order; an element is consumed only when it decodes (as Foundation).
struct UnkeyedTokenContainer: UnkeyedDecodingContainer {
    let document: JSONDocument
    let array: Int
    private(set) var currentIndex = 0
    /// The token of the element at `currentIndex`.
    private var next: Int

    init(document: JSONDocument, array: Int) {
        self.document = document
        self.array = array
        next = array + 1
    }

    var codingPath: [any CodingKey] { document.codingPath(to: array) }
    var count: Int? { Int(document.tokens[array].length) }
    var isAtEnd: Bool { currentIndex >= Int(document.tokens[array].length) }

    /// The next element's token, not yet consumed.
    private func element<T>(_ type: T.Type) throws -> Int {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: codingPath + [JSONKey(index: currentIndex)], debugDescription: "Unkeyed container is at end."))
        }
        return next
    }

    private mutating func consume<T>(_ value: T) -> T {
        next = Int(document.tokens[next].end)
        currentIndex += 1
        return value
    }

    private mutating func scalar<T: JSONScalar>() throws -> T {
        consume(try T.decode(element(T.self), in: document, codingPath: codingPath + [JSONKey(index: currentIndex)]))
    }

    mutating func decodeNil() throws -> Bool {
        guard document.isNull(try element(Any?.self)) else { return false }
        return consume(true)
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try scalar() }
    mutating func decode(_ type: String.Type) throws -> String { try scalar() }
    mutating func decode(_ type: Double.Type) throws -> Double { try scalar() }
    mutating func decode(_ type: Float.Type) throws -> Float { try scalar() }
    mutating func decode(_ type: Int.Type) throws -> Int { try scalar() }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try scalar() }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try scalar() }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try scalar() }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try scalar() }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try scalar() }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try scalar() }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try scalar() }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try scalar() }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try scalar() }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        consume(try document.decode(T.self, at: element(T.self), codingPath: codingPath + [JSONKey(index: currentIndex)]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        consume(try TokenDecoder(document: document, token: element(type)).container(keyedBy: type))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        consume(try TokenDecoder(document: document, token: element([Any].self)).unkeyedContainer())
    }

    mutating func superDecoder() throws -> any Decoder {
        consume(TokenDecoder(document: document, token: try element((any Decoder).self)))
    }
}

/// The one value of a value that decodes from a scalar (a raw-value enum, a checked name,
/// `Optional`), or as another value in its place.
struct SingleValueTokenContainer: SingleValueDecodingContainer {
    let decoder: TokenDecoder

    var codingPath: [any CodingKey] { decoder.codingPath }
    private var document: JSONDocument { decoder.document }

    private func scalar<T: JSONScalar>() throws -> T { try T.decode(decoder.token, in: document, codingPath: codingPath) }

    func decodeNil() -> Bool { document.isNull(decoder.token) }
    func decode(_ type: Bool.Type) throws -> Bool { try scalar() }
    func decode(_ type: String.Type) throws -> String { try scalar() }
    func decode(_ type: Double.Type) throws -> Double { try scalar() }
    func decode(_ type: Float.Type) throws -> Float { try scalar() }
    func decode(_ type: Int.Type) throws -> Int { try scalar() }
    func decode(_ type: Int8.Type) throws -> Int8 { try scalar() }
    func decode(_ type: Int16.Type) throws -> Int16 { try scalar() }
    func decode(_ type: Int32.Type) throws -> Int32 { try scalar() }
    func decode(_ type: Int64.Type) throws -> Int64 { try scalar() }
    func decode(_ type: UInt.Type) throws -> UInt { try scalar() }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try scalar() }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try scalar() }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try scalar() }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try scalar() }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try document.decode(T.self, at: decoder.token, codingPath: codingPath)
    }
}
