/// The member names a decoder written by hand knows, found by the fingerprint the parser
/// computed for each member: a small open-addressing table, then one comparison of the
/// bytes. A name is known by its position in the list the table was made from (a decoder
/// lists its `Int` enum's cases in order, and turns the position back into its case).
/// Not generic, so that the walk over a line's members is compiled once, for every caller.
/// Made once per type (a `static let` of the decoder); read from any thread.
public struct JSONMemberNames: Sendable {
    private let spellings: [[UInt8]]
    private let fingerprints: [UInt64]
    /// Positions in `spellings`, -1 for an empty slot; a power of two, at most a quarter full.
    private let slots: [Int16]

    public init(_ names: [String]) {
        spellings = names.map { Array($0.utf8) }
        fingerprints = spellings.map { spelling in spelling.withUnsafeBytes(JSONText.fingerprint) }
        var size = 16
        while size < spellings.count * 4 { size *= 2 }
        var slots = [Int16](repeating: -1, count: size)
        for (position, fingerprint) in fingerprints.enumerated() {
            var slot = Int(truncatingIfNeeded: fingerprint) & (size - 1)
            while slots[slot] >= 0 { slot = (slot + 1) & (size - 1) }
            slots[slot] = Int16(position)
        }
        self.slots = slots
    }

    /// The position of the name whose fingerprint is `fingerprint` and for whose spelling
    /// `matches` is true (it compares the member's own name); nil for a name not listed.
    func position(fingerprint: UInt64, matching matches: (UnsafeRawBufferPointer) -> Bool) -> Int? {
        var slot = Int(truncatingIfNeeded: fingerprint) & (slots.count - 1)
        while slots[slot] >= 0 {
            let position = Int(slots[slot])
            if fingerprints[position] == fingerprint, spellings[position].withUnsafeBytes(matches) { return position }
            slot = (slot + 1) & (slots.count - 1)
        }
        return nil
    }
}
