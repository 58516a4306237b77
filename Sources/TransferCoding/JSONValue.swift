import Foundation

/// One value of a parsed JSON text, for decoders written by hand for one type (the journal's
/// task lines, read by the hundred thousand when a daemon starts): an object's members are
/// walked once, by the fingerprints the parser already computed (`forEachMember`), where
/// `Codable`'s keyed containers look up every key a type knows, present or not, through
/// generic witness calls. Each kind of value is read exactly as `CompactJSONDecoder` reads it
/// (the same document methods, so the same checks and results), and any other type is handed
/// to that decoder (`decode(_:)`). A value that keeps its document alive; one thread.
public struct JSONValue {
    let document: JSONDocument
    let token: Int

    /// The value a whole text holds. Throws what `CompactJSONDecoder` throws for a text it
    /// cannot parse.
    public init(parsing data: Data) throws {
        document = try JSONDocument(parsing: data)
        token = 0
    }

    init(document: JSONDocument, token: Int) {
        self.document = document
        self.token = token
    }

    /// Made only for an error.
    public var codingPath: [any CodingKey] { document.codingPath(to: token) }

    public var isNull: Bool { document.isNull(token) }

    public func bool() throws -> Bool { try document.bool(at: token, codingPath: codingPath) }
    public func string() throws -> String { try document.string(at: token, codingPath: codingPath) }
    public func int() throws -> Int { try document.integer(at: token, codingPath: codingPath) }
    public func int64() throws -> Int64 { try document.integer(at: token, codingPath: codingPath) }
    public func uint64() throws -> UInt64 { try document.integer(at: token, codingPath: codingPath) }
    public func float() throws -> Float { try document.floatingPoint(at: token, codingPath: codingPath) }
    public func double() throws -> Double { try document.floatingPoint(at: token, codingPath: codingPath) }
    /// An ISO 8601 date, as `CompactJSONDecoder` reads a `Date`.
    public func date() throws -> Date { try document.date(at: token, codingPath: codingPath) }

    /// A value of any other type, by `CompactJSONDecoder` (its coding paths start at the
    /// top of the text, as if the whole text had been decoded by it).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try document.decode(T.self, at: token, codingPath: codingPath)
    }

    /// Calls `body` with each member of this object whose name `names` lists, and the
    /// name's position in that list, in no particular order (the parser has refused objects
    /// with a name twice); other members are skipped, as `Codable` ignores them. Throws, as
    /// a keyed container does, when this is not an object.
    public func forEachMember(named names: JSONMemberNames, _ body: (Int, JSONValue) throws -> Void) throws {
        guard document.tokens[token].kind == .object else { throw document.mismatch([String: Any].self, at: token, codingPath: codingPath) }
        try document.forEachMember(of: token) { fingerprint, nameToken in
            guard let position = names.position(fingerprint: fingerprint, matching: { document.name(at: nameToken, equals: $0) }) else { return }
            try body(position, JSONValue(document: document, token: nameToken + 1))
        }
    }

    /// Calls `body` with each element of this array, in order. Throws, as an unkeyed
    /// container does, when this is not an array.
    public func forEachElement(_ body: (JSONValue) throws -> Void) throws {
        guard document.tokens[token].kind == .array else { throw document.mismatch([Any].self, at: token, codingPath: codingPath) }
        var element = token + 1
        while element < document.tokens[token].end {
            try body(JSONValue(document: document, token: element))
            element = Int(document.tokens[element].end)
        }
    }

    /// The number of elements of an array, members of an object; 0 for any other value.
    public var count: Int {
        let kind = document.tokens[token].kind
        return kind == .array || kind == .object ? Int(document.tokens[token].length) : 0
    }
}
