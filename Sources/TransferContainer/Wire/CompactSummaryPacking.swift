import Foundation

/// The compact form of `TaskSummaries`' payload (`{"count": N, "compact": "<base64>"}`): for
/// each summary, its identifier's difference from the one before (the first's from 0), its
/// revision, state and four byte counts, each a zigzag LEB128 varint. A queued task takes
/// 7 bytes where the fixed form takes 56: with 100,000 tasks the reply was 7.1 MiB of base64,
/// and encoding it, copying it through both processes' buffers and decoding it were a third
/// of a `getAllTasks`. The daemon writes it for clients that said they read it
/// (`ClientHello.readsCompactSummaries`); both forms are read. Stateless.
enum CompactSummaryPacking {
    static func pack(_ tasks: [TaskSummary]) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(tasks.count * 8)
        var previous: Int64 = 0
        for task in tasks {
            let identifier = Int64(task.taskIdentifier)
            put(identifier &- previous, into: &bytes)
            previous = identifier
            put(Int64(task.revision), into: &bytes)
            put(Int64(task.state.rawValue), into: &bytes)
            put(task.countOfBytesReceived, into: &bytes)
            put(task.countOfBytesExpectedToReceive, into: &bytes)
            put(task.countOfBytesSent, into: &bytes)
            put(task.countOfBytesExpectedToSend, into: &bytes)
        }
        return Data(bytes)
    }

    /// Exactly `count` summaries from `data`; a varint cut short or too long, a state that is
    /// none of `TaskState`'s or bytes left over is a `Failure` (never a trap: these bytes
    /// come from the socket).
    static func unpack(_ data: Data, count: Int) throws(Failure) -> [TaskSummary] {
        // Each summary takes at least 7 bytes: a count larger than that allows is refused
        // before anything is reserved for it.
        guard count >= 0, count <= data.count / 7 else { throw .corrupt("\(data.count) bytes cannot hold \(count) task summaries") }
        // `withUnsafeBytes` rethrows untyped errors: the result carries the typed one out.
        return try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in Result { () throws(Failure) in try unpack(raw, count: count) } }.get()
    }

    private static func unpack(_ raw: UnsafeRawBufferPointer, count: Int) throws(Failure) -> [TaskSummary] {
        var reader = Reader(bytes: raw)
        var tasks: [TaskSummary] = []
        tasks.reserveCapacity(count)
        var identifier: Int64 = 0
        for _ in 0..<count {
            identifier = identifier &+ (try reader.next())
            let revision = try reader.next()
            let rawState = try reader.next()
            guard let state = TaskState(rawValue: Int(rawState)) else { throw .corrupt("task \(identifier) has no state \(rawState)") }
            let received = try reader.next(), expectedToReceive = try reader.next(), sent = try reader.next(), expectedToSend = try reader.next()
            tasks.append(TaskSummary(taskIdentifier: Int(identifier), revision: Int(revision), state: state, countOfBytesReceived: received,
                                     countOfBytesExpectedToReceive: expectedToReceive, countOfBytesSent: sent, countOfBytesExpectedToSend: expectedToSend))
        }
        guard reader.offset == raw.count else { throw .corrupt("\(raw.count - reader.offset) bytes after \(count) task summaries") }
        return tasks
    }

    /// Why a compact payload cannot be read.
    enum Failure: Error {
        case corrupt(String)
    }

    /// `value` zigzag-encoded (small magnitudes, negative ones too, in few bytes), as LEB128.
    private static func put(_ value: Int64, into bytes: inout [UInt8]) {
        var rest = UInt64(bitPattern: (value << 1) ^ (value >> 63))
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// Reads varints from the payload in order.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        mutating func next() throws(Failure) -> Int64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard offset < bytes.count else { throw .corrupt("a task summary is cut short") }
                let byte = bytes[offset]
                offset += 1
                // The tenth byte holds the 64th bit only.
                guard shift < 63 || byte <= 1 else { throw .corrupt("a number in a task summary does not fit in 64 bits") }
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
        }
    }
}
