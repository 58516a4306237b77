/// A strict parser of RFC 8259 JSON from UTF-8 bytes into a flat array of tokens, with an
/// index of each object's names. Refuses what the RFC does not allow (trailing commas,
/// comments, a byte order mark, leading zeros, `NaN`, unescaped control characters, invalid
/// UTF-8, lone surrogate escapes, text after the value), objects with two members of the
/// same name (so that a lookup cannot depend on which one it finds), and nesting deeper
/// than 512 (as Foundation), without recursion. Single-use: made and run by `JSONDocument`.
struct JSONParser {
    static let maximumDepth = 512

    /// The text, followed by one 0 byte (`count` is without it). No token contains a 0, so
    /// every scan stops there without a bounds check of its own.
    private let text: UnsafeRawBufferPointer
    private let count: Int
    private var position = 0
    private(set) var tokens: [JSONToken] = []
    private(set) var names: [NameEntry] = []
    /// The containers not yet closed, outermost first.
    private var open: [Int] = []

    init(text: UnsafeRawBufferPointer) {
        self.text = text
        count = text.count - 1
        // Records have about one token for every 8 bytes and one name for every 16: with a
        // little more than that, most texts need no growth.
        tokens.reserveCapacity(count / 6 + 4)
        names.reserveCapacity(count / 12 + 4)
        open.reserveCapacity(16)
    }

    mutating func parse() throws {
        guard count < Int(UInt32.max) else { throw error("the text is larger than 4 GiB", at: 0) }
        try parseValue()
        skipWhitespace()
        guard position == count else { throw error("unexpected text after the value", at: position) }
    }

    private mutating func parseValue() throws {
        values: while true {
            skipWhitespace()
            switch text[position] {
            case UInt8(ascii: "{"):
                try openContainer(.object)
                skipWhitespace()
                if text[position] == UInt8(ascii: "}") {
                    position += 1
                    try closeObject()
                } else {
                    try scanName()
                    continue values
                }
            case UInt8(ascii: "["):
                try openContainer(.array)
                skipWhitespace()
                if text[position] == UInt8(ascii: "]") {
                    position += 1
                    closeArray()
                } else {
                    tokens[open.last!].length += 1
                    continue values
                }
            case UInt8(ascii: "\""): try scanString()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
            case UInt8(ascii: "t"): try scanLiteral("true", .true)
            case UInt8(ascii: "f"): try scanLiteral("false", .false)
            case UInt8(ascii: "n"): try scanLiteral("null", .null)
            default: throw error(unexpectedValue(), at: position)
            }
            // A value is complete: the next member or element, or the end of its container (and maybe of theirs).
            while let container = open.last {
                skipWhitespace()
                let byte = text[position]
                position += 1
                if tokens[container].kind == .object {
                    if byte == UInt8(ascii: ",") {
                        skipWhitespace()
                        try scanName()
                        continue values
                    }
                    guard byte == UInt8(ascii: "}") else { throw error("expected ',' or '}'", at: position - 1) }
                    try closeObject()
                } else {
                    if byte == UInt8(ascii: ",") {
                        tokens[container].length += 1
                        continue values
                    }
                    guard byte == UInt8(ascii: "]") else { throw error("expected ',' or ']'", at: position - 1) }
                    closeArray()
                }
            }
            return
        }
    }

    /// Why no value starts at `position`, naming the two things Foundation's parser allows.
    private func unexpectedValue() -> String {
        if position == 0 && text.starts(with: [0xEF, 0xBB, 0xBF]) { return "a byte order mark" }
        let previous = text[..<position].last { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }
        return previous == UInt8(ascii: ",") && text[position] == UInt8(ascii: "]") ? "a trailing comma" : "expected a value"
    }

    private mutating func skipWhitespace() {
        while true {
            switch text[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    // MARK: Containers

    private mutating func openContainer(_ kind: JSONToken.Kind) throws {
        guard open.count < Self.maximumDepth else { throw error("nested more than \(Self.maximumDepth) deep", at: position) }
        open.append(tokens.count)
        tokens.append(JSONToken(kind: kind, offset: 0, length: 0, end: 0))
        position += 1
    }

    private mutating func closeArray() {
        tokens[open.removeLast()].end = UInt32(tokens.count)
    }

    /// Ends the innermost object and indexes its names: sorted by fingerprint, with no name twice.
    private mutating func closeObject() throws {
        let object = open.removeLast()
        tokens[object].end = UInt32(tokens.count)
        tokens[object].offset = UInt32(names.count)
        var member = object + 1
        while member < tokens.count {
            let fingerprint = JSONText.withName(tokens[member], in: text, JSONText.fingerprint)
            names.append(NameEntry(fingerprint: fingerprint, token: UInt32(member)))
            member = Int(tokens[member + 1].end)
        }
        let first = Int(tokens[object].offset)
        guard names.count - first > 1 else { return }
        let (tokens, text) = (self.tokens, self.text)
        let repeated = names.withUnsafeMutableBufferPointer { names -> JSONToken? in
            var entries = UnsafeMutableBufferPointer(rebasing: names[first...])
            entries.sort { $0.fingerprint < $1.fingerprint }
            for index in entries.indices.dropFirst() where entries[index].fingerprint == entries[index - 1].fingerprint {
                let name = tokens[Int(entries[index].token)]
                if JSONText.withName(name, in: text, { JSONText.name(tokens[Int(entries[index - 1].token)], in: text, equals: $0) }) { return name }
            }
            return nil
        }
        if let repeated {
            let name = JSONText.withName(repeated, in: text) { String(decoding: $0, as: UTF8.self) }
            throw error("a second member named \"\(name)\"", at: Int(repeated.offset) - 1)
        }
    }

    /// A member's name and its colon; the value comes next.
    private mutating func scanName() throws {
        guard text[position] == UInt8(ascii: "\"") else {
            throw error(text[position] == UInt8(ascii: "}") ? "a trailing comma" : "expected a member name", at: position) // `{}` was taken before
        }
        try scanString()
        tokens[open.last!].length += 1
        skipWhitespace()
        guard text[position] == UInt8(ascii: ":") else { throw error("expected ':'", at: position) }
        position += 1
    }

    // MARK: Scalars

    /// The string whose opening quote is at `position`: its escapes and UTF-8 checked.
    private mutating func scanString() throws {
        let start = position + 1
        var index = start
        var escaped = false
        while true {
            // Eight bytes at a time while none is a quote, a backslash, a control character or non-ASCII.
            while index + 8 <= count {
                let word = text.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                guard !JSONText.hasEscapable(word) && !JSONText.hasNonASCII(word) else { break }
                index += 8
            }
            let byte = text[index]
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                index = try scanEscape(at: index)
            } else if byte < 0x20 {
                throw error(index == count ? "unterminated string" : "a control character in a string", at: index)
            } else if byte < 0x80 {
                index += 1
            } else {
                index = try scanUTF8(at: index)
            }
        }
        tokens.append(JSONToken(kind: escaped ? .escapedString : .string, offset: UInt32(start), length: UInt32(index - start), end: UInt32(tokens.count + 1)))
        position = index + 1
    }

    /// The escape at `index` (a backslash); returns the index after it. A `\u` escape of a
    /// surrogate must be a high one followed by a low one.
    private func scanEscape(at index: Int) throws -> Int {
        switch text[index + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return index + 2
        case UInt8(ascii: "u"):
            guard let unit = JSONText.hexQuad(text, at: index + 2) else { throw error("\\u without four hex digits", at: index) }
            switch unit {
            case 0xDC00..<0xE000: throw error("a low surrogate escape without a high one before it", at: index)
            case 0xD800..<0xDC00:
                guard text[index + 6] == UInt8(ascii: "\\"), text[index + 7] == UInt8(ascii: "u"),
                      let low = JSONText.hexQuad(text, at: index + 8), (0xDC00..<0xE000).contains(low) else {
                    throw error("a high surrogate escape without a low one after it", at: index)
                }
                return index + 12
            default: return index + 6
            }
        default:
            throw error("an invalid escape", at: index)
        }
    }

    /// The multi-byte UTF-8 sequence at `index`; returns the index after it. Overlong forms,
    /// surrogates and code points past U+10FFFF are refused (Unicode table 3-7).
    private func scanUTF8(at index: Int) throws -> Int {
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool { range.contains(text[index + offset]) }
        let length: Int
        switch text[index] {
        case 0xC2...0xDF: length = continuation(1) ? 2 : 0
        case 0xE0: length = continuation(1, 0xA0...0xBF) && continuation(2) ? 3 : 0
        case 0xE1...0xEC, 0xEE...0xEF: length = continuation(1) && continuation(2) ? 3 : 0
        case 0xED: length = continuation(1, 0x80...0x9F) && continuation(2) ? 3 : 0
        case 0xF0: length = continuation(1, 0x90...0xBF) && continuation(2) && continuation(3) ? 4 : 0
        case 0xF1...0xF3: length = continuation(1) && continuation(2) && continuation(3) ? 4 : 0
        case 0xF4: length = continuation(1, 0x80...0x8F) && continuation(2) && continuation(3) ? 4 : 0
        default: length = 0
        }
        guard length > 0 else { throw error("invalid UTF-8", at: index) }
        return index + length
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func scanNumber() throws {
        func isDigit(_ index: Int) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[index]) }
        let start = position
        var index = position
        if text[index] == UInt8(ascii: "-") { index += 1 }
        if text[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard isDigit(index) else { throw error("expected a digit", at: index) }
            while isDigit(index) { index += 1 }
        }
        var kind = JSONToken.Kind.integer
        if text[index] == UInt8(ascii: ".") {
            kind = .number
            index += 1
            guard isDigit(index) else { throw error("expected a digit after the decimal point", at: index) }
            while isDigit(index) { index += 1 }
        }
        if text[index] == UInt8(ascii: "e") || text[index] == UInt8(ascii: "E") {
            kind = .number
            index += 1
            if text[index] == UInt8(ascii: "+") || text[index] == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { throw error("expected a digit in the exponent", at: index) }
            while isDigit(index) { index += 1 }
        }
        tokens.append(JSONToken(kind: kind, offset: UInt32(start), length: UInt32(index - start), end: UInt32(tokens.count + 1)))
        position = index
    }

    private mutating func scanLiteral(_ literal: StaticString, _ kind: JSONToken.Kind) throws {
        let start = position
        // Compared in order, so that nothing past the first difference (the 0 at the latest) is read.
        let matches = literal.withUTF8Buffer { expected in expected.indices.allSatisfy { text[start + $0] == expected[$0] } }
        guard matches else { throw error("expected \(literal)", at: start) }
        position += literal.utf8CodeUnitCount
        tokens.append(JSONToken(kind: kind, offset: UInt32(start), length: UInt32(position - start), end: UInt32(tokens.count + 1)))
    }

    private func error(_ reason: String, at offset: Int) -> DecodingError {
        let place = offset >= count ? "at the end" : "at byte \(offset)"
        return DecodingError.dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: "The given data was not valid JSON: \(reason) \(place)."))
    }
}
