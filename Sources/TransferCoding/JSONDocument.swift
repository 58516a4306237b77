import Foundation

/// A JSON text parsed once for decoding: a private copy of the bytes, its tokens, and its
/// name index. Turns tokens into values (numbers only from what they say exactly, strings
/// without copying when they have no escapes), finds an object's members by name, and
/// rebuilds coding paths for errors. Made by one `CompactJSONDecoder.decode` call; the
/// decoders and containers it hands out keep it alive. Not shared across threads.
final class JSONDocument {
    /// The text and a 0 after it (see `JSONParser`).
    private let text: UnsafeRawBufferPointer
    let tokens: [JSONToken]
    private let names: [NameEntry]
    /// A `null` outside the value (after its last token): what `superDecoder(forKey:)` reads
    /// for a key the object does not have.
    let absent: Int

    init(parsing data: Data) throws {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count + 1, alignment: 8)
        copy.copyBytes(from: data)
        copy[data.count] = 0
        var parser = JSONParser(text: UnsafeRawBufferPointer(copy))
        do { try parser.parse() } catch {
            copy.deallocate()
            throw error
        }
        text = UnsafeRawBufferPointer(copy)
        var tokens = parser.tokens
        absent = tokens.count
        tokens.append(JSONToken(kind: .null, offset: 0, length: 0, end: UInt32(absent + 1)))
        self.tokens = tokens
        names = parser.names
    }

    deinit {
        text.deallocate()
    }

    // MARK: Members

    /// The value of the member of `object` named `name`, if it has one.
    func member(_ name: String, in object: Int) -> Int? {
        var name = name
        return name.withUTF8 { utf8 in
            let name = UnsafeRawBufferPointer(utf8)
            let fingerprint = JSONText.fingerprint(name)
            var low = Int(tokens[object].offset)
            let end = low + Int(tokens[object].length)
            var high = end
            while low < high {
                let middle = (low + high) / 2
                if names[middle].fingerprint < fingerprint { low = middle + 1 } else { high = middle }
            }
            while low < end && names[low].fingerprint == fingerprint {
                let token = Int(names[low].token)
                if JSONText.name(tokens[token], in: text, equals: name) { return token + 1 }
                low += 1
            }
            return nil
        }
    }

    /// Calls `body` with the fingerprint and the name's token of each member of `object`,
    /// in the name index's order (by fingerprint), for `JSONValue.forEachMember`.
    func forEachMember(of object: Int, _ body: (UInt64, Int) throws -> Void) rethrows {
        let first = Int(tokens[object].offset)
        for entry in names[first..<(first + Int(tokens[object].length))] {
            try body(entry.fingerprint, Int(entry.token))
        }
    }

    /// Whether the name token `token` (escapes undone) is `name`.
    func name(at token: Int, equals name: UnsafeRawBufferPointer) -> Bool {
        JSONText.name(tokens[token], in: text, equals: name)
    }

    /// The keys of the members of `object` that `Key` knows, in the order of the text.
    func memberKeys<Key: CodingKey>(of object: Int) -> [Key] {
        var result: [Key] = []
        result.reserveCapacity(Int(tokens[object].length))
        var member = object + 1
        while member < tokens[object].end {
            if let key = Key(stringValue: content(of: member)) { result.append(key) }
            member = Int(tokens[member + 1].end)
        }
        return result
    }

    // MARK: Values

    func isNull(_ token: Int) -> Bool { tokens[token].kind == .null }

    func bool(at token: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> Bool {
        switch tokens[token].kind {
        case .true: return true
        case .false: return false
        default: throw mismatch(Bool.self, at: token, codingPath: codingPath())
        }
    }

    func string(at token: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> String {
        guard tokens[token].kind == .string || tokens[token].kind == .escapedString else { throw mismatch(String.self, at: token, codingPath: codingPath()) }
        return content(of: token)
    }

    /// The text of a string token, escapes undone.
    private func content(of token: Int) -> String {
        let raw = JSONText.bytes(of: tokens[token], in: text)
        guard tokens[token].kind == .escapedString else { return String(decoding: raw, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: raw.count) { JSONText.unescape(raw, into: UnsafeMutableRawBufferPointer($0)) }
    }

    /// A date in ISO 8601 (`ISO8601Format`), from a string.
    func date(at token: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> Date {
        let text = try string(at: token, codingPath: codingPath())
        guard let date = ISO8601Format.date(from: text) else { throw corrupted(codingPath(), "not an ISO 8601 date: \(text)") }
        return date
    }

    /// An integer from an integer literal that fits.
    func integer<Integer: FixedWidthInteger>(at token: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> Integer {
        guard tokens[token].kind == .integer else {
            guard tokens[token].kind == .number else { throw mismatch(Integer.self, at: token, codingPath: codingPath()) }
            throw DecodingError.typeMismatch(Integer.self, DecodingError.Context(codingPath: codingPath(), debugDescription: "Expected to decode \(Integer.self) but found the number \(literal(token)), which is not an integer literal."))
        }
        let digits = JSONText.bytes(of: tokens[token], in: text)
        let negative = digits[0] == UInt8(ascii: "-")
        var magnitude: UInt64 = 0
        var fits = true
        for digit in digits.dropFirst(negative ? 1 : 0) where fits {
            let (times10, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            (magnitude, fits) = (sum, !overflow && !carry)
        }
        if fits && !negative, magnitude <= UInt64(Integer.max) { return Integer(magnitude) }
        if fits && negative, magnitude == 0 || (Integer.isSigned && magnitude - 1 <= UInt64(Integer.max)) {
            return Integer(truncatingIfNeeded: 0 &- magnitude) // two's complement
        }
        throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: codingPath(), debugDescription: "Number \(literal(token)) does not fit in \(Integer.self)."))
    }

    /// A binary floating-point number from any number literal, correctly rounded. A literal
    /// beyond the type's range, or one not 0 that rounds to 0, is refused (as Foundation does).
    func floatingPoint<Float: BinaryFloatingPoint & LosslessStringConvertible>(at token: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> Float {
        guard tokens[token].kind == .integer || tokens[token].kind == .number else { throw mismatch(Float.self, at: token, codingPath: codingPath()) }
        if let exact: Float = exactValue(of: JSONText.bytes(of: tokens[token], in: text)) { return exact }
        let literal = literal(token)
        guard let value = Float(literal), value.isFinite, value != 0 || !literal.prefix(while: { $0 != "e" && $0 != "E" }).contains(where: { ("1"..."9").contains($0) }) else {
            throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: codingPath(), debugDescription: "Number \(literal) does not fit in \(Float.self)."))
        }
        return value
    }

    /// The value of a literal whose digits make an integer that the type holds exactly and
    /// whose power of ten it holds exactly too: one division or multiplication, so correctly
    /// rounded (most numbers records hold, like 0.5 or 60). Nil for any other.
    private func exactValue<Float: BinaryFloatingPoint>(of literal: UnsafeRawBufferPointer) -> Float? {
        var mantissa: UInt64 = 0
        var digits = 0
        var exponent = 0
        var index = literal[0] == UInt8(ascii: "-") ? 1 : 0
        var fraction = false
        while index < literal.count {
            let byte = literal[index]
            index += 1
            if byte == UInt8(ascii: ".") {
                fraction = true
            } else if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
                guard literal.count - index <= 4, let written = Int(String(decoding: UnsafeRawBufferPointer(rebasing: literal[index...]), as: UTF8.self)) else { return nil }
                exponent += written
                break
            } else {
                digits += 1
                guard digits <= 19 else { return nil }
                mantissa = mantissa * 10 + UInt64(byte - UInt8(ascii: "0"))
                if fraction { exponent -= 1 }
            }
        }
        let largestExactPower = Float.significandBitCount >= 52 ? 22 : 10
        guard mantissa <= 1 << (Float.significandBitCount + 1), exponent.magnitude <= largestExactPower else { return nil }
        let power = Float(Self.powersOfTen[Int(exponent.magnitude)])
        let magnitude = exponent < 0 ? Float(mantissa) / power : Float(mantissa) * power
        return literal[0] == UInt8(ascii: "-") ? -magnitude : magnitude
    }

    private static let powersOfTen: [Double] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22]

    /// The text of a number token.
    private func literal(_ token: Int) -> String {
        String(decoding: JSONText.bytes(of: tokens[token], in: text), as: UTF8.self)
    }

    /// A value of any type at `token`: the types our Foundation configuration decodes from
    /// strings (`Date` in ISO 8601, `Data` in Base64, `URL`); directly, a `String` (a
    /// dictionary's or an array's) and a `[String: String]` (header fields), as Foundation
    /// reads string-keyed dictionaries; any other by its own `init(from:)`.
    func decode<T: Decodable>(_ type: T.Type, at token: Int, codingPath: @autoclosure () -> [any CodingKey]) throws -> T {
        if T.self == String.self { return try string(at: token, codingPath: codingPath()) as! T }
        if T.self == [String: String].self {
            guard tokens[token].kind == .object else { throw mismatch(T.self, at: token, codingPath: codingPath()) }
            var dictionary = [String: String](minimumCapacity: Int(tokens[token].length))
            var member = token + 1
            while member < tokens[token].end {
                let name = content(of: member)
                dictionary[name] = try string(at: member + 1, codingPath: codingPath() + [JSONKey(stringValue: name)])
                member = Int(tokens[member + 1].end)
            }
            return dictionary as! T
        }
        if T.self == Date.self { return try date(at: token, codingPath: codingPath()) as! T }
        if T.self == Data.self {
            guard let data = Data(base64Encoded: try string(at: token, codingPath: codingPath())) else { throw corrupted(codingPath(), "Encountered Data is not valid Base64.") }
            return data as! T
        }
        if T.self == URL.self {
            guard let url = URL(string: try string(at: token, codingPath: codingPath())) else { throw corrupted(codingPath(), "Invalid URL string.") }
            return url as! T
        }
        return try T(from: TokenDecoder(document: self, token: token))
    }

    // MARK: Errors

    /// The error for a value of another kind than `type` needs: `valueNotFound` for null.
    func mismatch<T>(_ type: T.Type, at token: Int, codingPath: [any CodingKey]) -> DecodingError {
        let found: String
        switch tokens[token].kind {
        case .null: return DecodingError.valueNotFound(type, DecodingError.Context(codingPath: codingPath, debugDescription: "Cannot get value of type \(type) -- found null value instead"))
        case .true, .false: found = "a boolean"
        case .integer, .number: found = "a number"
        case .string, .escapedString: found = "a string"
        case .object: found = "an object"
        case .array: found = "an array"
        }
        return DecodingError.typeMismatch(type, DecodingError.Context(codingPath: codingPath, debugDescription: "Expected to decode \(type) but found \(found) instead."))
    }

    private func corrupted(_ codingPath: [any CodingKey], _ description: String) -> DecodingError {
        DecodingError.dataCorrupted(DecodingError.Context(codingPath: codingPath, debugDescription: description))
    }

    /// The coding path of `token`, rebuilt from the tokens (made only when asked for, as
    /// for an error): member names and array indexes from the top.
    func codingPath(to token: Int) -> [any CodingKey] {
        var path: [any CodingKey] = []
        var node = 0
        descent: while node != token {
            let container = tokens[node]
            guard container.kind == .object || container.kind == .array else { break }
            var child = node + 1
            var index = 0
            while child < container.end {
                let value = container.kind == .object ? child + 1 : child
                if token >= value && token < tokens[value].end {
                    path.append(container.kind == .object ? JSONKey(stringValue: content(of: child)) : JSONKey(index: index))
                    node = value
                    continue descent
                }
                child = Int(tokens[value].end)
                index += 1
            }
            break
        }
        return path
    }
}
