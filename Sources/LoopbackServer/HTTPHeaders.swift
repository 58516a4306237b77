/// Header fields in the order they were received, with case-insensitive lookup.
///
/// An immutable value once built (by the request parser on a connection thread); safe to
/// hand to any thread, e.g. inside a `RecordedRequest`.
public struct HTTPHeaders: Sendable, Sequence, CustomStringConvertible {
    /// One `name: value` line as received (value without surrounding whitespace).
    public struct Field: Sendable, Hashable {
        /// The field name as received (compare with `HTTPHeaders`' case-insensitive lookups).
        public let name: String
        /// The value, without surrounding whitespace.
        public let value: String

        /// A field line.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Every field line, in the order received.
    public private(set) var fields: [Field]

    /// Headers with `fields`, in order.
    public init(_ fields: [Field] = []) {
        self.fields = fields
    }

    /// Adds a field line at the end.
    public mutating func append(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Every value of the named field, in order.
    public func values(for name: String) -> [String] {
        fields.lazy.filter { Self.namesMatch($0.name, name) }.map(\.value)
    }

    /// The named field's value; several lines of the same field are combined with ", "
    /// as RFC 9110 §5.3 allows. Nil when absent.
    public subscript(name: String) -> String? {
        let values = values(for: name)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether a field of that name is present, compared case-insensitively.
    public func contains(_ name: String) -> Bool {
        fields.contains { Self.namesMatch($0.name, name) }
    }

    /// The field's comma-separated list elements, lowercased (for `Connection`, `Expect`,
    /// `Transfer-Encoding`).
    func tokens(for name: String) -> [String] {
        values(for: name)
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingHTTPWhitespace().lowercased() }
            .filter { !$0.isEmpty }
    }

    /// The field lines in order.
    public func makeIterator() -> IndexingIterator<[Field]> {
        fields.makeIterator()
    }

    /// One `name: value` line per field, as received.
    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    /// Field names are ASCII tokens, so an ASCII case fold is exact.
    static func namesMatch(_ a: String, _ b: String) -> Bool {
        let a = a.utf8, b = b.utf8
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { x, y in
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= UInt8(ascii: "a") && (x | 0x20) <= UInt8(ascii: "z"))
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's "OWS").
    func trimmingHTTPWhitespace() -> String {
        let isOWS: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isOWS($0) }),
              let last = lastIndex(where: { !isOWS($0) }) else { return "" }
        return String(self[first...last])
    }
}
