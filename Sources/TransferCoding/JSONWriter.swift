/// Compact JSON text written into a growing byte buffer: string literals escaped (`"`, `\`
/// and control characters only; `/` and non-ASCII are written as they are, as UTF-8),
/// integers and finite floating-point numbers. Knows nothing of structure: the encoding
/// stream puts the brackets, commas and colons. A value, owned by its `EncodingStream` or by
/// whoever writes a line by hand (`LogEntry.jsonLine`).
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init() {
        bytes.reserveCapacity(512)
    }

    public mutating func write(_ byte: UInt8) {
        bytes.append(byte)
    }

    public mutating func write(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Cuts the text back to its first `count` bytes.
    mutating func truncate(to count: Int) {
        bytes.removeSubrange(count...)
    }

    public mutating func write(string: String) {
        var string = string
        string.withUTF8 { write(stringLiteral: $0) }
    }

    private mutating func write(stringLiteral utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        let text = UnsafeRawBufferPointer(utf8)
        var unwritten = 0 // start of the bytes that need no escaping, not yet copied
        var index = 0
        while index < text.count {
            if index + 8 <= text.count && !JSONText.hasEscapable(text.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                index += 8
                continue
            }
            let byte = text[index]
            index += 1
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: text[unwritten..<(index - 1)]))
            unwritten = index
            switch byte {
            case UInt8(ascii: "\""): write("\\\"")
            case UInt8(ascii: "\\"): write("\\\\")
            case 0x0A: write("\\n")
            case 0x0D: write("\\r")
            case 0x09: write("\\t")
            case 0x08: write("\\b")
            case 0x0C: write("\\f")
            default:
                write("\\u00")
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0xF)])
            }
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: text[unwritten...]))
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// An integer of at most 64 bits, in decimal.
    public mutating func write<Integer: FixedWidthInteger>(integer value: Integer) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = UInt64(value.magnitude)
        var digits = 1
        var rest = magnitude / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        var index = bytes.count - 1
        repeat {
            bytes[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
            index -= 1
        } while magnitude > 0
    }

    /// A finite number as Swift prints it (`0.5`, `100.0`, `1e-05`): the shortest text that reads back as the same value.
    mutating func write<Float: BinaryFloatingPoint & LosslessStringConvertible>(finite value: Float) {
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }
}
