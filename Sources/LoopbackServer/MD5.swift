import Foundation

/// MD5 (RFC 1321) in plain Swift, for HTTP Digest authentication's `algorithm=MD5` only:
/// MD5 is broken as a content hash, and this one-shot version is not built for speed.
/// Stateless; callable from any thread.
enum MD5 {
    /// Left-rotation amounts, four per round.
    private static let shifts: [UInt32] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21]

    /// K[i] = floor(|sin(i + 1)| · 2^32), as RFC 1321 §3.4 defines the table.
    private static let constants: [UInt32] = (0..<64).map { i in
        UInt32(truncatingIfNeeded: Int64((abs(sin(Double(i + 1))) * 4_294_967_296).rounded(.down)))
    }

    /// The 16-byte digest of `message`.
    static func digest(_ message: some Collection<UInt8>) -> [UInt8] {
        var bytes = Array(message)
        let bitLength = UInt64(bytes.count) &* 8
        bytes.append(0x80)
        while bytes.count % 64 != 56 { bytes.append(0) }
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }

        var state: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476)
        var words = [UInt32](repeating: 0, count: 16)
        for blockStart in stride(from: 0, to: bytes.count, by: 64) {
            for i in 0..<16 {
                let at = blockStart + 4 * i
                words[i] = UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8
                    | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
            }
            var (a, b, c, d) = state
            for i in 0..<64 {
                let mixed: UInt32, index: Int
                switch i / 16 {
                case 0: (mixed, index) = ((b & c) | (~b & d), i)
                case 1: (mixed, index) = ((d & b) | (~d & c), (5 * i + 1) % 16)
                case 2: (mixed, index) = (b ^ c ^ d, (3 * i + 5) % 16)
                default: (mixed, index) = (c ^ (b | ~d), (7 * i) % 16)
                }
                let sum = a &+ mixed &+ constants[i] &+ words[index]
                let shift = shifts[(i / 16) * 4 + i % 4]
                (a, d, c) = (d, c, b)
                b = b &+ (sum << shift | sum >> (32 - shift))
            }
            state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
        }
        return [state.0, state.1, state.2, state.3].flatMap { word in
            (0..<4).map { UInt8(truncatingIfNeeded: word >> (8 * UInt32($0))) }
        }
    }

    /// Lowercase hex digest of the UTF-8 bytes of `text`.
    static func hexDigest(of text: String) -> String {
        digest(text.utf8).map { String(format: "%02x", $0) }.joined()
    }
}
