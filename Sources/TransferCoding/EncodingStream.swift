import Foundation

/// One encoding in progress: the JSON written so far and a stack of levels, one for each
/// value being encoded and each container open inside it, innermost last. Owned by the
/// `CompactJSONEncoder.encode` call that made it; the encoders and containers it hands to
/// `encode(to:)` refer to it, and to their level by depth and identity.
///
/// Nothing is built before it is written: a member's key goes out before its value is
/// encoded, and a level is closed (`}`, `]`, or `{}` when its value asked for no container)
/// when the value's `encode(to:)` returns, or as soon as a container that encloses it is
/// written to again (synthesized conformances finish one nested container before they start
/// the next).
/// A container used after its level was closed cannot be written in place any more; that is
/// recorded as `Failure.outOfOrder`, and `CompactJSONEncoder` then encodes the value again
/// with Foundation's encoder, which builds a tree first.
final class EncodingStream {
    /// Why an encoding cannot go on, found where no error could be thrown (asking for a
    /// container), or thrown by the container call that found it.
    enum Failure: Error {
        /// A container or encoder was used after its level was closed.
        case outOfOrder
        /// A value asked for two kinds of container, or encoded two values in one single
        /// value container (Foundation stops the process for both).
        case misuse(String, codingPath: [any CodingKey])
    }

    /// A value being encoded, or a container open inside it.
    struct Level {
        enum Kind {
            /// A value that has asked for no container yet.
            case value
            case keyed
            case unkeyed
            /// A value that asked for a single value container and has not encoded into it yet.
            case single
            case singleWritten
        }

        let identity: Int
        var kind: Kind
        /// Members or elements written.
        var count = 0
        /// Where the level is in its parent, for coding paths: under a key, at an array index, or neither (the top level, a single value container's value).
        let key: (any CodingKey)?
        let index: Int?
    }

    /// A level as its encoders and containers name it.
    struct Slot {
        let depth: Int
        let identity: Int
    }

    // Used by one encoding's calls, one at a time and never across a call out: no run-time
    // exclusivity checks (they were a fifth of the time).
    @exclusivity(unchecked) var writer = JSONWriter()
    @exclusivity(unchecked) private var levels: [Level] = []
    private var identities = 0
    private(set) var failure: Failure?

    // MARK: Values

    /// The JSON of `value`, or the failure that stopped it.
    func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        switch try encodeValue(value, key: nil, index: nil) {
        case .value, .single:
            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        case .keyed, .unkeyed, .singleWritten:
            if let failure { throw failure }
            return writer.bytes
        }
    }

    /// Where `encode(_:at:in:)` puts a value in its container.
    enum Position {
        case member(any CodingKey)
        case element
        case single
    }

    /// Encodes `value` as the next member or element, or the single value, of the container
    /// at `slot`; if it throws, the text is rolled back.
    func encode<T: Encodable>(_ value: T, at position: Position, in slot: Slot) throws {
        guard enter(slot) else { throw failure! }
        let mark = Mark(byteCount: writer.bytes.count, level: levels[slot.depth], depth: slot.depth)
        do {
            switch position {
            case .member(let key):
                try beginMember(slot, key: key)
                try encodeValue(value, key: key, index: nil)
            case .element:
                try beginElement(slot)
                try encodeValue(value, key: nil, index: levels[slot.depth].count - 1)
            case .single:
                try beginSingle(slot)
                try encodeValue(value, key: nil, index: nil)
            }
        } catch {
            if failure == nil { rollBack(to: mark) }
            throw error
        }
    }

    /// Encodes `value` where the stream stands (after a key, a comma, in a single value
    /// container, or at the start); returns the kind of container it used.
    @discardableResult
    private func encodeValue<T: Encodable>(_ value: T, key: (any CodingKey)?, index: Int?) throws -> Level.Kind {
        if writeSpecial(value) { return .singleWritten }
        let slot = push(.value, key: key, index: index)
        try value.encode(to: ValueEncoder(stream: self, slot: slot))
        guard enter(slot) else { throw failure! }
        let kind = levels[slot.depth].kind
        closeInnermost()
        return kind
    }

    /// Writes the types our Foundation configuration (`RecordCoding`) encodes as strings: a
    /// `Date` in ISO 8601 with milliseconds, `Data` in Base64, a `URL` as its absolute string;
    /// and, without a trip through `encode(to:)`, a `String` (a dictionary's or an array's)
    /// and a `[String: String]` (header fields), as Foundation writes string-keyed dictionaries.
    private func writeSpecial<T: Encodable>(_ value: T) -> Bool {
        if T.self == String.self {
            writer.write(string: value as! String)
        } else if T.self == [String: String].self {
            writer.write(UInt8(ascii: "{"))
            for (index, (key, member)) in (value as! [String: String]).enumerated() {
                if index > 0 { writer.write(UInt8(ascii: ",")) }
                writer.write(string: key)
                writer.write(UInt8(ascii: ":"))
                writer.write(string: member)
            }
            writer.write(UInt8(ascii: "}"))
        } else if T.self == Date.self {
            writer.write(string: ISO8601Format.string(from: value as! Date))
        } else if T.self == Data.self {
            writer.write(string: (value as! Data).base64EncodedString())
        } else if T.self == URL.self {
            writer.write(string: (value as! URL).absoluteString)
        } else {
            return false
        }
        return true
    }

    // MARK: Levels

    private func push(_ kind: Level.Kind, key: (any CodingKey)?, index: Int?) -> Slot {
        identities += 1
        levels.append(Level(identity: identities, kind: kind, key: key, index: index))
        return Slot(depth: levels.count - 1, identity: identities)
    }

    /// Makes `slot` the innermost level by closing the levels above it, which are finished;
    /// false, with the failure recorded, when `slot` itself was closed already.
    func enter(_ slot: Slot) -> Bool {
        guard failure == nil else { return false }
        guard slot.depth < levels.count, levels[slot.depth].identity == slot.identity else {
            failure = .outOfOrder
            return false
        }
        while levels.count > slot.depth + 1 { closeInnermost() }
        return true
    }

    private func closeInnermost() {
        switch levels.removeLast().kind {
        case .value, .single: writer.write("{}") // nothing was encoded: an empty object, as Foundation writes
        case .keyed: writer.write(UInt8(ascii: "}"))
        case .unkeyed: writer.write(UInt8(ascii: "]"))
        case .singleWritten: break
        }
    }

    /// Gives the value at `slot` the container it asks for: its opening bracket, or nothing
    /// when it asks again for the kind it has (a superclass's `encode(to:)`, say).
    func open(_ slot: Slot, as kind: Level.Kind) {
        guard enter(slot) else { return }
        switch (levels[slot.depth].kind, kind) {
        case (.value, .keyed): writer.write(UInt8(ascii: "{"))
        case (.value, .unkeyed): writer.write(UInt8(ascii: "["))
        case (.value, .single): break
        case (.keyed, .keyed), (.unkeyed, .unkeyed), (.single, .single), (.singleWritten, .single): return
        default:
            failure = .misuse("asked for a container of another kind (\(kind)) than it had (\(levels[slot.depth].kind))", codingPath: codingPath(to: slot.depth))
            return
        }
        levels[slot.depth].kind = kind
    }

    /// Starts the next element of the container at `slot`: a comma unless it is the first.
    /// Throws the recorded failure when `slot` was closed already.
    func beginElement(_ slot: Slot) throws {
        guard enter(slot) else { throw failure! }
        if levels[slot.depth].count > 0 { writer.write(UInt8(ascii: ",")) }
        levels[slot.depth].count += 1
    }

    /// Starts the next member of the keyed container at `slot`: the comma, the key, the colon.
    func beginMember(_ slot: Slot, key: some CodingKey) throws {
        try beginElement(slot)
        writer.write(string: key.stringValue)
        writer.write(UInt8(ascii: ":"))
    }

    /// Starts the one value of the single value container at `slot`.
    func beginSingle(_ slot: Slot) throws {
        guard enter(slot) else { throw failure! }
        guard levels[slot.depth].kind == .single else {
            failure = .misuse("encoded a second value in a single value container", codingPath: codingPath(to: slot.depth))
            throw failure!
        }
        levels[slot.depth].kind = .singleWritten
    }

    /// Opens a container, or for `.value` a super encoder's value, as the next member (under
    /// `key`) or element of the container at `slot`. When `slot` was closed already the slot
    /// returned is dead: the failure is recorded, and every use of it throws.
    func nested(_ kind: Level.Kind, in slot: Slot, key: (any CodingKey)?) -> Slot {
        do {
            if let key { try beginMember(slot, key: key) } else { try beginElement(slot) }
        } catch {
            return Slot(depth: .max, identity: 0)
        }
        switch kind {
        case .keyed: writer.write(UInt8(ascii: "{"))
        case .unkeyed: writer.write(UInt8(ascii: "["))
        case .value, .single, .singleWritten: break
        }
        return push(kind, key: key, index: key == nil ? levels[slot.depth].count - 1 : nil)
    }

    /// Members or elements the container at `slot` has written.
    func count(_ slot: Slot) -> Int {
        slot.depth < levels.count && levels[slot.depth].identity == slot.identity ? levels[slot.depth].count : 0
    }

    // MARK: Undoing a member that failed

    /// What `rollBack` restores: the text and the state of the level at `slot`.
    struct Mark {
        let byteCount: Int
        let level: Level
        let depth: Int
    }

    /// Forgets what was written since `mark`, so that a caller that catches the error (`try?`)
    /// goes on from valid JSON, the value that failed left out. (Foundation's encoder stops the
    /// process when a value that failed inside a nested container is followed by another.)
    private func rollBack(to mark: Mark) {
        writer.truncate(to: mark.byteCount)
        levels.removeSubrange((mark.depth + 1)...)
        levels[mark.depth] = mark.level
    }

    // MARK: Coding paths and errors

    func codingPath(to depth: Int) -> [any CodingKey] {
        levels.prefix(min(depth, levels.count - 1) + 1).compactMap { level in level.key ?? level.index.map(JSONKey.init(index:)) }
    }

    /// Throws Foundation's error for a number JSON cannot hold.
    func checkFinite<Float: BinaryFloatingPoint>(_ value: Float, at codingPath: @autoclosure () -> [any CodingKey]) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: codingPath(), debugDescription: "Unable to encode \(Float.self).\(value) directly in JSON."))
        }
    }
}
