import Glibc

/// Buffered reading from one connection: request heads, chunk-size lines and body bytes.
///
/// Owned by the connection's thread and never shared. Bytes that arrive after a request's
/// end (a pipelined next request) stay buffered for the next read.
final class SocketReader {
    enum ReadError: Error {
        /// The head or line is longer than the caller's limit.
        case tooLarge
        /// The peer closed the connection in the middle of a message.
        case truncated
    }

    private let socket: SocketFD
    /// Unread bytes are `buffer[start...]`.
    private var buffer: [UInt8] = []
    private var start = 0
    /// Scratch space for `recv`; bodies are read through it without copying into `buffer`.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)

    init(socket: SocketFD) {
        self.socket = socket
    }

    deinit {
        scratch.deallocate()
    }

    /// Reads one request head: the bytes up to and including the blank line. Blank lines
    /// before a request are skipped (RFC 9112 §2.2). Returns nil if the peer closed the
    /// connection cleanly before sending anything.
    func readHead(limit: Int) throws -> ArraySlice<UInt8>? {
        var scan = start          // next byte to look at
        var lineStart = start
        var skipped = 0           // leading blank-line bytes, counted against the limit
        while true {
            while scan < buffer.count {
                if buffer[scan] == UInt8(ascii: "\n") {
                    let lineLength = scan - lineStart
                    let blank = lineLength == 0 || (lineLength == 1 && buffer[lineStart] == UInt8(ascii: "\r"))
                    if blank && lineStart == start {
                        // Blank line before any request line: drop it.
                        skipped += lineLength + 1
                        start = scan + 1
                    } else if blank {
                        let head = buffer[start...scan]
                        start = scan + 1
                        return head
                    }
                    lineStart = scan + 1
                }
                scan += 1
                if scan - start + skipped > limit { throw ReadError.tooLarge }
            }
            // Need more bytes: compact, then receive.
            if start > 0 {
                buffer.removeSubrange(0..<start)
                scan -= start
                lineStart -= start
                start = 0
            }
            let n = try socket.receive(into: scratch)
            if n == 0 {
                if buffer.isEmpty { return nil }
                throw ReadError.truncated
            }
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<n]))
        }
    }

    /// Reads one line (for chunk sizes and trailers) without its CRLF or LF.
    func readLine(limit: Int) throws -> ArraySlice<UInt8> {
        var scan = start
        while true {
            while scan < buffer.count {
                if buffer[scan] == UInt8(ascii: "\n") {
                    var end = scan
                    if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
                    let line = buffer[start..<end]
                    start = scan + 1
                    return line
                }
                scan += 1
                if scan - start > limit { throw ReadError.tooLarge }
            }
            if start > 0 {
                buffer.removeSubrange(0..<start)
                scan -= start
                start = 0
            }
            let n = try socket.receive(into: scratch)
            if n == 0 { throw ReadError.truncated }
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<n]))
        }
    }

    /// Consumes a line ending (CRLF or LF) that must come next; false if other bytes do.
    func consumeLineEnd() throws -> Bool {
        var byte = try readByte()
        if byte == UInt8(ascii: "\r") { byte = try readByte() }
        return byte == UInt8(ascii: "\n")
    }

    private func readByte() throws -> UInt8 {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
            let n = try socket.receive(into: scratch)
            if n == 0 { throw ReadError.truncated }
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<n]))
        }
        defer { start += 1 }
        return buffer[start]
    }

    /// Reads exactly `count` bytes, handing them to `consume` piece by piece as they arrive,
    /// never more than `pieceLimit` at once (so a throttled reader takes small sips).
    func read(exactly count: Int64, pieceLimit: Int = .max,
              _ consume: (UnsafeRawBufferPointer) throws -> Void) throws {
        var remaining = count
        let limit = max(1, min(pieceLimit, scratch.count))
        while remaining > 0 {
            let want = Int(min(Int64(limit), remaining))
            if start < buffer.count {
                // Buffered bytes first (whatever came in with the head or a chunk line).
                let take = min(buffer.count - start, want)
                try buffer.withUnsafeBytes { try consume(UnsafeRawBufferPointer(rebasing: $0[start..<start + take])) }
                start += take
                remaining -= Int64(take)
                continue
            }
            // The rest straight from the socket, never more than this message needs.
            let n = try socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: scratch[..<want]))
            if n == 0 { throw ReadError.truncated }
            try consume(UnsafeRawBufferPointer(rebasing: scratch[..<n]))
            remaining -= Int64(n)
        }
    }

    /// Reads and discards whatever the peer still sends, until it closes, `limit` bytes
    /// have passed or a receive times out. Used before closing after an error response so
    /// unread input does not make the kernel reset the connection and lose the response.
    func discardRemaining(limit: Int) {
        var total = buffer.count - start
        buffer.removeAll()
        start = 0
        while total < limit {
            guard let n = try? socket.receive(into: scratch), n > 0 else { return }
            total += n
        }
    }
}
