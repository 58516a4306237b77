import Foundation
import Glibc
@testable import LoopbackServer

/// Failures of the raw test client.
enum ClientError: Error {
    case connect(Int32)
    case timeout
    case closed
    case malformed(String)
}

/// A response as read off the wire by `RawHTTPClient`.
struct RawResponse {
    var status: Int
    var fields: [(name: String, value: String)]
    var body: [UInt8]
    /// The connection ended before the announced body was complete.
    var truncated = false

    func header(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var data: Data { Data(body) }
}

/// A minimal blocking HTTP/1.1 client on a raw socket, for exact control over the bytes
/// sent (malformed input, pipelining, keep-alive). Every read has a deadline
/// (SO_RCVTIMEO), so a misbehaving server fails the test instead of hanging it.
/// Used by one test at a time.
final class RawHTTPClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: UInt16, timeout: Int = 10) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // Thrown before `fd` is set, so that deinit does not run: closing the number a second
        // time closed whatever another thread had opened with it meanwhile (another test's
        // LoopbackServer listener, whose connect then failed with ECONNREFUSED).
        guard result == 0 else {
            let code = errno
            close(descriptor)
            throw ClientError.connect(code)
        }
        fd = descriptor
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { throw ClientError.closed }
            offset += n
        }
    }

    /// `GET path` (or another method) with a Host header and `extra` header lines.
    func request(_ method: String = "GET", _ path: String, _ extra: [String] = []) throws {
        try send(([ "\(method) \(path) HTTP/1.1", "Host: 127.0.0.1" ] + extra).joined(separator: "\r\n") + "\r\n\r\n")
    }

    /// Reads one response. `forHead` means the request was HEAD (no body follows).
    /// Interim 1xx responses are returned like any other.
    func readResponse(forHead: Bool = false) throws -> RawResponse {
        let headBytes = try readHead()
        let lines = String(decoding: headBytes, as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 "),
              let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            throw ClientError.malformed("status line: \(lines.first ?? "")")
        }
        let fields = lines.dropFirst().map { line -> (String, String) in
            let colon = line.firstIndex(of: ":")!
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = RawResponse(status: status, fields: fields, body: [])
        if forHead || status < 200 || status == 204 || status == 304 { return response }
        if response.header("Transfer-Encoding") == "chunked" {
            try readChunked(into: &response)
        } else if let length = response.header("Content-Length").flatMap(Int.init) {
            response.body = try readUpTo(length)
            response.truncated = response.body.count < length
        } else {
            response.body = try readUntilClose()
        }
        return response
    }

    /// Reads only a response's head (status and fields), leaving its body unread.
    func readResponseHead() throws -> RawResponse {
        let lines = String(decoding: try readHead(), as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard let statusLine = lines.first, let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            throw ClientError.malformed("status line: \(lines.first ?? "")")
        }
        let fields = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return RawResponse(status: status, fields: fields, body: [])
    }

    /// Body bytes that arrive until the socket's deadline passes with nothing more, or the
    /// connection ends (`closed`): what a client of a stalled link has got.
    func readUntilSilent() throws -> (bytes: [UInt8], closed: Bool) {
        do {
            while try fill() {}
            defer { buffer.removeAll() }
            return (buffer, true)
        } catch ClientError.timeout {
            defer { buffer.removeAll() }
            return (buffer, false)
        }
    }

    /// True when the server has closed the connection (reads end of stream) within the deadline.
    func isClosedByServer() -> Bool {
        guard buffer.isEmpty else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    func readUntilClose() throws -> [UInt8] {
        while try fill() {}
        defer { buffer.removeAll() }
        return buffer
    }

    // MARK: Private

    /// Receives more bytes into the buffer; false at end of stream.
    @discardableResult
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { throw ClientError.timeout }
            if errno == ECONNRESET { return false }
            throw ClientError.malformed("recv errno \(errno)")
        }
        buffer.append(contentsOf: chunk[..<n])
        return n > 0
    }

    private func readHead() throws -> [UInt8] {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if let range = buffer.firstRange(of: end) {
                let head = Array(buffer[..<range.upperBound])
                buffer.removeSubrange(..<range.upperBound)
                return head
            }
            guard try fill() else { throw ClientError.closed }
        }
    }

    /// Up to `count` bytes; fewer only if the connection ends first.
    private func readUpTo(_ count: Int) throws -> [UInt8] {
        while buffer.count < count, try fill() {}
        let take = min(count, buffer.count)
        defer { buffer.removeSubrange(..<take) }
        return Array(buffer[..<take])
    }

    private func readLine() throws -> String {
        while true {
            if let range = buffer.firstRange(of: Array("\r\n".utf8)) {
                let line = String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
                buffer.removeSubrange(..<range.upperBound)
                return line
            }
            guard try fill() else { throw ClientError.closed }
        }
    }

    private func readChunked(into response: inout RawResponse) throws {
        do {
            while true {
                let line = try readLine()
                guard let size = Int(line.prefix { $0 != ";" }, radix: 16) else {
                    throw ClientError.malformed("chunk size \(line)")
                }
                if size == 0 {
                    while try !readLine().isEmpty {}
                    return
                }
                let piece = try readUpTo(size)
                response.body += piece
                guard piece.count == size else { throw ClientError.closed }
                guard try readLine().isEmpty else { throw ClientError.malformed("chunk end") }
            }
        } catch ClientError.closed {
            response.truncated = true
        }
    }
}

/// A temporary file with deterministic pseudo-random contents, removed by `remove()`.
struct TempFile {
    let url: URL
    let contents: Data

    init(size: Int, seed: UInt64 = 1) throws {
        contents = testBytes(size, seed: seed)
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("LoopbackServerTests-\(UUID().uuidString).bin")
        try contents.write(to: url)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Deterministic pseudo-random bytes (xorshift), so ranges can be checked against slices.
func testBytes(_ count: Int, seed: UInt64 = 1) -> Data {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        bytes[i] = UInt8(truncatingIfNeeded: state)
    }
    return Data(bytes)
}
