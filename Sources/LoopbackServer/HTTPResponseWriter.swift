import Foundation
import Glibc
import HTTPFormats

/// A response's status line and header fields. A value built on the connection thread.
struct ResponseHead {
    var status: Int
    var fields: [(name: String, value: String)] = []

    init(status: Int) {
        self.status = status
    }

    mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    func value(for name: String) -> String? {
        fields.first { HTTPHeaders.namesMatch($0.name, name) }?.value
    }

    /// Always answers as HTTP/1.1 (RFC 9110 §2.5), with a Date and Server field.
    func serialized() -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(for: status))\r\n"
        text += "Date: \(HTTPDate.now())\r\nServer: LoopbackServer\r\n"
        for field in fields {
            text += "\(field.name): \(field.value)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    static func reason(for status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 104: "Upload Resumption Supported"
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

/// How a response body is delimited on the wire.
enum ResponseFraming {
    case contentLength
    case chunked
    /// HTTP/1.0 without a length: the body ends when the connection closes.
    case closeDelimited
}

/// Faults applied while a body is written (from `RouteOptions`).
struct BodyPacing {
    var bytesPerSecond: Int?
    var dropAfterBytes: Int64?
    var stallAfterBytes: Int64?
    var trickleInterval: Double?

    /// Where a body of `total` bytes stalls, if it does. A stall past its end is none; one at
    /// the end of a chunked body sends every byte and withholds the last chunk, so that the
    /// client has the whole body but not its end.
    func stallPoint(total: Int64, framing: ResponseFraming) -> Int64? {
        stallAfterBytes.flatMap { $0 < total || ($0 == total && framing == .chunked) ? max(0, $0) : nil }
    }
}

/// Writes response heads and bodies to one connection's socket. Used only on that
/// connection's thread; body bytes are added to the server's shared total and throttle
/// pauses wait on the server's condition, so `stop()` cuts them short.
struct HTTPResponseWriter {
    /// Whether a body went out whole or was cut off on purpose (`dropAfterBytes`, or a stall
    /// the client gave up on).
    enum Outcome {
        case complete
        case dropped
    }

    /// The throttle pause ended because the server is stopping.
    struct Stopped: Error {}

    let socket: SocketFD
    let core: ServerCore

    /// Largest piece handed to sendfile or send at once: big enough that system-call
    /// overhead is negligible, small enough that `bytesSent` advances smoothly.
    static let pieceLimit = 8 << 20
    /// Chunk size when the body is sent chunked.
    static let chunkLimit = 1 << 20

    /// `bodyFollows` lets the head wait (MSG_MORE) to share packets with the body.
    func writeHead(_ head: ResponseHead, bodyFollows: Bool) throws {
        try socket.sendAll(head.serialized(), more: bodyFollows)
    }

    /// `HTTP/1.1 100 Continue` before reading a body the client is holding back.
    func writeContinue() throws {
        try socket.sendAll(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
    }

    /// Streams `range` of `body`: whole pieces via sendfile or send, chunk-framed if asked,
    /// throttled and cut short according to `pacing`.
    func writeBody(_ body: Representation.Body, range: Range<Int64>, framing: ResponseFraming,
                   pacing: BodyPacing) throws -> Outcome {
        let total = Int64(range.count)
        let dropAt = pacing.dropAfterBytes.flatMap { $0 < total ? max(0, $0) : nil }
        let stallAt = pacing.stallPoint(total: total, framing: framing)
        let limit = [dropAt, stallAt, total].compactMap { $0 }.min() ?? total
        // Throttled bodies go out in pieces of about 1/20 s each, then pause until due.
        let rate = pacing.bytesPerSecond.flatMap { $0 > 0 ? $0 : nil }
        let ratePiece = rate.map { Int64(max(1, $0 / 20)) }
        let trickle = pacing.trickleInterval.flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
        let started = Date()
        var sent: Int64 = 0

        while sent < limit {
            if let trickle {
                guard core.pause(until: Date(timeIntervalSinceNow: trickle)) else { throw Stopped() }
            }
            var piece = min(limit - sent, Int64(framing == .chunked ? Self.chunkLimit : Self.pieceLimit))
            if let ratePiece { piece = min(piece, ratePiece) }
            if trickle != nil { piece = 1 }
            if framing == .chunked {
                try socket.sendAll(Array((String(piece, radix: 16) + "\r\n").utf8), more: true)
            }
            try writeFully(body, from: range.lowerBound + sent, count: Int(piece))
            sent += piece
            if framing == .chunked {
                try socket.sendAll(Array("\r\n".utf8), more: sent < limit)
            }
            if let rate {
                let due = started.addingTimeInterval(Double(sent) / Double(rate))
                guard core.pause(until: due) else { throw Stopped() }
            }
        }
        if let stallAt, limit == stallAt, dropAt.map({ $0 >= stallAt }) ?? true {
            holdUntilClientLeaves()
            return .dropped
        }
        if dropAt != nil { return .dropped }
        if framing == .chunked {
            try socket.sendAll(Array("0\r\n\r\n".utf8))
        }
        return .complete
    }

    /// A stalled link: sends nothing more and keeps the connection open until the client
    /// closes it (or the server stops, whose shutdown wakes the read). What the client
    /// sends meanwhile is read and dropped; the socket's receive timeout only makes the
    /// loop look at `isStopping` again.
    private func holdUntilClientLeaves() {
        var scratch = [UInt8](repeating: 0, count: 4096)
        while !core.isStopping {
            let n = scratch.withUnsafeMutableBytes { recv(socket.raw, $0.baseAddress, $0.count, 0) }
            if n > 0 { continue }
            if n < 0, errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
            return  // end of stream or a reset: the client gave up
        }
    }

    /// Sends exactly `count` bytes starting at `offset`.
    ///
    /// The bytes are added to `bytesSent` before they are handed to the kernel (and what
    /// fails to go out is taken back), so a client that has received them can rely on
    /// the counter already including them.
    private func writeFully(_ body: Representation.Body, from offset: Int64, count: Int) throws {
        var remaining = count
        core.countBodyBytes(count)
        defer { if remaining > 0 { core.countBodyBytes(-remaining) } }
        switch body {
        case .file(let file):
            var position = off_t(offset)
            while remaining > 0 {
                let n = try socket.sendFile(file.fd, offset: &position, count: remaining)
                guard n > 0 else { throw SocketError("sendfile (file shrank)", code: EIO) }
                remaining -= n
            }
        case .data(let data):
            try data.withUnsafeBytes { buffer in
                var position = Int(offset)
                while remaining > 0 {
                    let n = try socket.sendSome(UnsafeRawBufferPointer(rebasing: buffer[position..<position + remaining]))
                    position += n
                    remaining -= n
                }
            }
        }
    }
}
