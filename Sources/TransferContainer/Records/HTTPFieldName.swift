/// HTTP field names compare without regard to ASCII case (RFC 9110 §5.1). They are tokens,
/// ASCII only, so no Unicode or locale folding is wanted, and the daemon compares them for
/// every header line of every response: inlinable, so that each caller gets it specialized
/// for its string types rather than walking two generic views.
extension StringProtocol {
    /// Whether this and `other` name the same HTTP field.
    @inlinable
    public func isSameHTTPFieldName(as other: some StringProtocol) -> Bool {
        utf8.count == other.utf8.count && zip(utf8, other.utf8).allSatisfy { x, y in
            let lower = x | 0x20 // ASCII letters differ from their capitals in this bit only
            return x == y || (lower == y | 0x20 && lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "z"))
        }
    }
}
