/// How a request's body is delimited (RFC 9112 §6.3). Derived from the head on the
/// connection thread.
enum RequestBodyFraming: Equatable {
    case none
    case length(Int64)
    case chunked

    /// Why the framing headers were refused; the connection is closed after answering.
    enum Error: Swift.Error, Equatable {
        /// 400: conflicting or invalid Content-Length / Transfer-Encoding.
        case malformed(String)
        /// 501: a transfer coding other than chunked.
        case unsupportedTransferCoding

        var status: Int {
            switch self {
            case .malformed: 400
            case .unsupportedTransferCoding: 501
            }
        }
    }

    init(_ head: RequestHead) throws(Error) {
        let codings = head.headers.tokens(for: "Transfer-Encoding")
        let lengths = head.headers.values(for: "Content-Length")
            .flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingHTTPWhitespace() }

        if !codings.isEmpty {
            // Both headers at once is how request smuggling starts; refuse (RFC 9112 §6.1).
            guard lengths.isEmpty else { throw .malformed("both Transfer-Encoding and Content-Length") }
            guard head.version.minor >= 1 else { throw .malformed("Transfer-Encoding in HTTP/1.0") }
            guard codings == ["chunked"] else { throw .unsupportedTransferCoding }
            self = .chunked
        } else if let first = lengths.first {
            guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.utf8.count <= 18,
                  first.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let length = Int64(first) else {
                throw .malformed("bad Content-Length")
            }
            self = length == 0 ? .none : .length(length)
        } else {
            self = .none
        }
    }
}

/// Reads a request body off the connection, handing each received piece to a sink.
///
/// Bodies nothing uses are drained (read and dropped) so keep-alive stays in step; upload
/// routes pass a sink that counts, hashes or stores the bytes. Runs on the connection thread.
enum RequestBodyReader {
    /// A chunked body that is not valid chunked coding.
    struct MalformedChunk: Error {}

    /// How a read ended.
    enum Outcome: Equatable {
        /// The whole body was read; its decoded length.
        case complete(Int64)
        /// `stopAfter` bytes were read and more of the body was still to come (not read).
        case stopped
    }

    /// Longest chunk-size line and total trailer size accepted.
    static let lineLimit = 4096
    static let trailerLimit = 64 * 1024

    /// Reads the whole body; returns its decoded length.
    @discardableResult
    static func read(_ framing: RequestBodyFraming, from reader: SocketReader,
                     into sink: (UnsafeRawBufferPointer) throws -> Void = { _ in }) throws -> Int64 {
        guard case .complete(let length) = try read(framing, from: reader, stopAfter: nil, into: sink) else {
            preconditionFailure("a read without stopAfter cannot stop early")
        }
        return length
    }

    /// Reads the body, or only its first `stopAfter` bytes when it is longer than that
    /// (the rest stays unread: the caller is about to drop the connection). Pieces are at
    /// most `pieceLimit` bytes, so a throttling sink can pace itself.
    static func read(_ framing: RequestBodyFraming, from reader: SocketReader, stopAfter: Int64?,
                     pieceLimit: Int = .max,
                     into sink: (UnsafeRawBufferPointer) throws -> Void) throws -> Outcome {
        var total: Int64 = 0
        /// Reads `count` bytes of content unless the stop point comes first; false if it did.
        func content(_ count: Int64) throws -> Bool {
            var left = count
            while left > 0 {
                let room = stopAfter.map { $0 - total } ?? left
                guard room > 0 else { return false }
                let take = min(left, room)
                try reader.read(exactly: take, pieceLimit: pieceLimit, sink)
                total += take
                left -= take
            }
            return true
        }

        switch framing {
        case .none:
            return .complete(0)
        case .length(let length):
            return try content(length) ? .complete(length) : .stopped
        case .chunked:
            while true {
                let size = try chunkSize(try reader.readLine(limit: lineLimit))
                if size == 0 { break }
                guard try content(size) else { return .stopped }
                guard try reader.consumeLineEnd() else { throw MalformedChunk() }
            }
            try skipTrailer(reader)
            return .complete(total)
        }
    }

    /// Trailer fields are read and ignored, up to the blank line.
    private static func skipTrailer(_ reader: SocketReader) throws {
        var trailerBytes = 0
        while true {
            let line = try reader.readLine(limit: lineLimit)
            if line.isEmpty { return }
            trailerBytes += line.count
            if trailerBytes > trailerLimit { throw SocketReader.ReadError.tooLarge }
        }
    }

    /// `1a2b[;extension]` → 0x1a2b.
    private static func chunkSize(_ line: ArraySlice<UInt8>) throws -> Int64 {
        let digits = line.prefix { $0 != UInt8(ascii: ";") }.trimmingSpaces()
        guard !digits.isEmpty, digits.count <= 15 else { throw MalformedChunk() }
        var size: Int64 = 0
        for byte in digits {
            guard let value = hexValue(byte) else { throw MalformedChunk() }
            size = size * 16 + Int64(value)
        }
        return size
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

private extension ArraySlice<UInt8> {
    func trimmingSpaces() -> ArraySlice<UInt8> {
        let isSpace: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let first = firstIndex(where: { !isSpace($0) }),
              let last = lastIndex(where: { !isSpace($0) }) else { return [] }
        return self[first...last]
    }
}
