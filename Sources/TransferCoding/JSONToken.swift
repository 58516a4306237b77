import Foundation

/// One value of a parsed JSON text, in the flat array `JSONParser` makes: a value's members
/// or elements follow it, and `end` skips them all. An object's members are pairs of tokens,
/// the name (a string) and then the value. A plain value, owned by its `JSONDocument`.
struct JSONToken {
    enum Kind: UInt8 {
        case null, `false`, `true`
        /// A number with neither fraction nor exponent.
        case integer
        case number
        /// A string with no escapes: its bytes are its UTF-8.
        case string
        case escapedString
        case object, array
    }

    var kind: Kind
    /// Strings: the offset of the first byte after the opening quote. Numbers: of the first
    /// byte. Objects: where the object's names start in the document's name index.
    var offset: UInt32
    /// Strings (without their quotes) and numbers: bytes. Objects: members. Arrays: elements.
    var length: UInt32
    /// The index of the token after this value and everything in it.
    var end: UInt32
}

/// An object member's name in the document's name index, where each object's names are
/// sorted by fingerprint so that a member is found by binary search, whatever the order.
struct NameEntry {
    var fingerprint: UInt64
    /// The name's token; the member's value is the token after it.
    var token: UInt32
}

/// What the parser, the document and the writer need of string contents: the raw bytes of
/// a string token, escapes undone, fingerprints of names, and the word-at-a-time test for
/// bytes that need a second look. Stateless.
enum JSONText {
    /// Whether any of the eight bytes of `word` is below 0x20, `"` or `\`: the bytes a JSON
    /// string cannot hold as they are. Never false when one is (may be true when none is).
    static func hasEscapable(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highBits }
        let control = (word &- ones &* 0x20) & ~word & highBits
        return (control | hasZeroByte(word ^ (ones &* 0x22)) | hasZeroByte(word ^ (ones &* 0x5C))) != 0
    }

    /// Whether any of the eight bytes of `word` is not ASCII.
    static func hasNonASCII(_ word: UInt64) -> Bool {
        word & 0x8080_8080_8080_8080 != 0
    }

    /// The bytes of a string or number token, in `text`.
    static func bytes(of token: JSONToken, in text: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: text[Int(token.offset)..<Int(token.offset + token.length)])
    }

    /// Writes the UTF-8 of a string token's `raw` bytes, which the parser has checked, with
    /// escapes undone, into `output` (at least `raw.count` bytes: undoing an escape never
    /// lengthens it). Returns the bytes written.
    static func unescape(_ raw: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int {
        var input = 0
        var written = 0
        func put(_ byte: UInt8) {
            output[written] = byte
            written += 1
        }
        while input < raw.count {
            let byte = raw[input]
            guard byte == UInt8(ascii: "\\") else {
                put(byte)
                input += 1
                continue
            }
            let escape = raw[input + 1]
            input += 2
            switch escape {
            case UInt8(ascii: "b"): put(0x08)
            case UInt8(ascii: "f"): put(0x0C)
            case UInt8(ascii: "n"): put(0x0A)
            case UInt8(ascii: "r"): put(0x0D)
            case UInt8(ascii: "t"): put(0x09)
            case UInt8(ascii: "u"):
                var scalar = hexQuad(raw, at: input)!
                input += 4
                if scalar >= 0xD800 && scalar < 0xDC00 { // a high surrogate; the parser checked that a low one follows
                    scalar = 0x10000 + (scalar - 0xD800) << 10 + (hexQuad(raw, at: input + 2)! - 0xDC00)
                    input += 6
                }
                for unit in UTF8.encode(Unicode.Scalar(scalar)!)! { put(unit) }
            default: put(escape) // " \ /
            }
        }
        return written
    }

    /// The four hex digits at `offset` as a number; nil if they are not four hex digits.
    /// Reads no further than the first byte that is not one.
    static func hexQuad(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32? {
        var value: UInt32 = 0
        for index in offset..<(offset + 4) {
            guard index < bytes.count else { return nil }
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// A 64-bit hash of a name's UTF-8, for the name index. Names with the same fingerprint
    /// are told apart by comparing their bytes.
    static func fingerprint(_ name: UnsafeRawBufferPointer) -> UInt64 {
        let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
        var hash = UInt64(name.count) &* multiplier
        var offset = 0
        while offset + 8 <= name.count {
            hash = (hash ^ name.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* multiplier
            hash ^= hash >> 29
            offset += 8
        }
        var tail: UInt64 = 0
        while offset < name.count {
            tail = tail << 8 | UInt64(name[offset])
            offset += 1
        }
        hash = (hash ^ tail) &* multiplier
        return hash ^ hash >> 32
    }

    /// Whether the name of a string token is `name`.
    static func name(_ token: JSONToken, in text: UnsafeRawBufferPointer, equals name: UnsafeRawBufferPointer) -> Bool {
        withName(token, in: text) { $0.count == name.count && ($0.isEmpty || memcmp($0.baseAddress!, name.baseAddress!, $0.count) == 0) }
    }

    /// The name of a string token, escapes undone, passed to `body`.
    static func withName<Result>(_ token: JSONToken, in text: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let raw = bytes(of: token, in: text)
        guard token.kind == .escapedString else { return body(raw) }
        return withUnsafeTemporaryAllocation(byteCount: raw.count, alignment: 1) { buffer in
            body(UnsafeRawBufferPointer(rebasing: buffer[..<unescape(raw, into: buffer)]))
        }
    }
}
