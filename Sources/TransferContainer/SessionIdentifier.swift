import Foundation

/// A name checked once so that every later use is safe as one path component; encoded in
/// JSON as a plain string and checked again when decoded.
public protocol CheckedName: Hashable, Codable, Sendable, CustomStringConvertible {
    var rawValue: String { get }
    init(_ rawValue: String) throws(IdentifierError)
}

extension CheckedName {
    public init(from decoder: Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do { try self.init(text) } catch { throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.description)) }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}

/// A background session identifier, checked once so that every later use is safe as a
/// file-name component (S1.1; the daemon keeps one folder per session).
public struct SessionIdentifier: CheckedName {
    public let rawValue: String

    /// The longest identifier accepted, in bytes: leaves room for suffixes in a 255-byte name.
    public static let maximumLength = 200

    public init(_ rawValue: String) throws(IdentifierError) {
        try Self.validate(rawValue, kind: "session identifier")
        self.rawValue = rawValue
    }

    /// A name made of hex digits and a suffix of letters and dots, valid by construction.
    init(digestOnly rawValue: String) {
        self.rawValue = rawValue
    }

    /// Checks a name that becomes one path component: session identifiers, bundle identifiers, app groups.
    public static func validate(_ text: String, kind: String) throws(IdentifierError) {
        if isPlainlyValid(text) { return } // every frame names a session: the usual case in one pass
        if text.isEmpty { throw IdentifierError(text, kind: kind, reason: "it is empty") }
        if text.utf8.count > maximumLength {
            throw IdentifierError(text, kind: kind, reason: "it is \(text.utf8.count) bytes long; at most \(maximumLength) are allowed")
        }
        if text.contains("/") || text.contains("\\") { throw IdentifierError(text, kind: kind, reason: "it contains a path separator") }
        if text.contains("..") { throw IdentifierError(text, kind: kind, reason: "it contains \"..\"") }
        if text.hasPrefix(".") || text.hasPrefix("-") { throw IdentifierError(text, kind: kind, reason: "it starts with \"\(text.first!)\"") }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
        if let bad = text.first(where: { !allowed.contains($0) }) {
            let scalars = bad.unicodeScalars.map { String(format: "U+%04X", $0.value) }.joined(separator: " ")
            throw IdentifierError(text, kind: kind, reason: "it contains \(scalars) (only ASCII letters, digits, '.', '-' and '_' are allowed)")
        }
    }
}

extension SessionIdentifier {
    /// True when `text` passes every check of `validate`, found in one pass over its bytes;
    /// false sends it through the checks that say what is wrong.
    static func isPlainlyValid(_ text: String) -> Bool {
        var count = 0
        var previous: UInt8 = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"): break
            case UInt8(ascii: "."): if count == 0 || previous == byte { return false }
            case UInt8(ascii: "-"): if count == 0 { return false }
            default: return false
            }
            previous = byte
            count += 1
        }
        return count > 0 && count <= maximumLength
    }
}

/// A bundle identifier (app or extension), e.g. `com.example.host.fetch`.
public struct BundleIdentifier: CheckedName, Comparable {
    public let rawValue: String

    public init(_ rawValue: String) throws(IdentifierError) {
        try SessionIdentifier.validate(rawValue, kind: "bundle identifier")
        self.rawValue = rawValue
    }

    /// A name valid by construction (letters, digits and dots only).
    init(constructed rawValue: String) {
        self.rawValue = rawValue
    }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// A refused identifier: which one, what kind, and why.
public struct IdentifierError: Error, CustomStringConvertible, Sendable, Equatable {
    public let identifier: String
    public let kind: String
    public let reason: String

    public init(_ identifier: String, kind: String, reason: String) {
        self.identifier = identifier
        self.kind = kind
        self.reason = reason
    }

    public var description: String {
        let shown = identifier.count > 60 ? String(identifier.prefix(60)) + "…" : identifier
        return "invalid \(kind) \"\(shown)\": \(reason)"
    }
}
