import Foundation
import TransferCoding

/// An event encoded once, as compact JSON, for both the journal line that makes it durable
/// and the push that delivers it: the daemon splices the same bytes into both instead of
/// encoding the event (and the task record inside it) twice. The bytes are exactly what
/// `JournalLine.event` and `DaemonFrame.push(.event)` encode to (`EncodedEventTests`).
/// A value.
public struct EncodedEvent: Sendable {
    public let number: UInt64
    /// The event's compact JSON.
    public let json: Data

    public init(_ event: EventRecord) throws {
        number = event.number
        json = try RecordCoding.encodeCompact(event)
    }

    /// `JournalLine.event(event)`, without its newline.
    public var journalLine: Data {
        Data("{\"event\":".utf8) + json + Data("}".utf8)
    }

    /// The frame of `DaemonFrame.push(.event(session: session, event))`.
    public func pushFrame(session: SessionIdentifier) throws -> Data {
        let body = Data("{\"push\":{\"_0\":{\"event\":{\"session\":".utf8) + (try RecordCoding.encodeCompact(session))
            + Data(",\"_1\":".utf8) + json + Data("}}}}".utf8)
        return try Frame.frame(body, limit: Frame.maximumReplySize)
    }
}
