import Foundation
import TransferCoding

/// The framing on the daemon's socket: a 4-byte big-endian length, then that many bytes of
/// JSON. Frames larger than the reader's limit are refused, so a peer cannot make the other
/// side buffer without bound: a client's request may be 4 MiB (`maximumSize`); the daemon's
/// answers may be larger (`maximumReplySize`), since a session's task summaries, all in one
/// reply to `getAllTasks`, grow with their number (`openSession` sends records in pages,
/// `DaemonReply.tasksPerPage`).
public enum Frame {
    /// The largest request the daemon reads.
    public static let maximumSize = 4 << 20
    /// The largest request the daemon reads from a process that has not yet said who it is:
    /// a hello, a ping.
    public static let maximumUnidentifiedSize = 64 << 10
    /// The largest frame a client reads from its daemon.
    public static let maximumReplySize = 256 << 20

    /// Encodes one message as a frame of at most `limit` bytes.
    public static func encode<T: Encodable>(_ message: T, limit: Int = maximumSize) throws -> Data {
        try frame(RecordCoding.encodeCompact(message), limit: limit)
    }

    /// The frame of a message already encoded as `body`.
    public static func frame(_ body: Data, limit: Int = maximumSize) throws -> Data {
        guard body.count <= limit else { throw FrameError.oversized(body.count, limit: limit) }
        var frame = Data(capacity: body.count + 4)
        let length = UInt32(body.count).bigEndian
        withUnsafeBytes(of: length) { frame.append(contentsOf: $0) }
        frame.append(body)
        return frame
    }

    public static func decode<T: Decodable>(_ type: T.Type, from body: Data) throws(FrameError) -> T {
        do { return try RecordCoding.decode(T.self, from: body) } catch { throw .malformed("\(error)") }
    }
}

/// A frame that cannot be accepted.
public enum FrameError: Error, CustomStringConvertible, Sendable, Equatable {
    case oversized(Int, limit: Int)
    case malformed(String)

    public var description: String {
        switch self {
        case .oversized(let size, let limit): "frame of \(size) bytes exceeds the limit of \(limit)"
        case .malformed(let reason): "malformed frame: \(reason)"
        }
    }
}

/// Cuts a byte stream into frame bodies. Owned by whoever reads the socket.
public struct FrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// The largest frame body accepted (a reader may raise it once it trusts its peer more).
    public var limit: Int

    public init(limit: Int = Frame.maximumSize) {
        self.limit = limit
    }

    /// Bytes received but not yet part of a complete frame.
    public var pendingByteCount: Int { buffer.count - start }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10) // an idle peer keeps little
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame body, nil if more bytes are needed.
    public mutating func next() throws(FrameError) -> Data? {
        guard buffer.count - start >= 4 else { return nil }
        let length = Int(buffer[start]) << 24 | Int(buffer[start + 1]) << 16 | Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
        guard length <= limit else { throw .oversized(length, limit: limit) }
        guard buffer.count - start - 4 >= length else { return nil }
        let body = Data(buffer[(start + 4)..<(start + 4 + length)])
        start += 4 + length
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10)
            start = 0
        } else if start > 64 << 10 && start > buffer.count / 2 {
            buffer.removeSubrange(0..<start) // moves at most as much as was consumed
            start = 0
        }
        return body
    }
}
