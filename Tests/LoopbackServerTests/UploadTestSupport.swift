import Foundation
import Glibc
@testable import LoopbackServer
import Digests

/// A directory of its own for one test, removed by `remove()`.
struct TempDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("LoopbackServerTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// A multi-MiB upload body and its digest, made once and shared by the tests (hashing is
/// slow in debug builds).
enum Payload {
    static let body = testBytes(8 * 1024 * 1024 + 123, seed: 7)
    static let sha256 = sha256Hex(body)
}

/// Lowercase hex SHA-256.
func sha256Hex(_ data: Data) -> String {
    SHA256.hexDigest(of: data)
}

/// The `{"bytes":N,"sha256":"hex"}` an upload route answers with.
struct UploadAnswer: Equatable {
    var bytes: Int64
    var sha256: String?

    init(bytes: Int64, sha256: String?) {
        self.bytes = bytes
        self.sha256 = sha256
    }

    init?(_ body: [UInt8]) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let bytes = object["bytes"] as? Int else { return nil }
        self.bytes = Int64(bytes)
        self.sha256 = object["sha256"] as? String
    }
}

extension RawHTTPClient {
    /// Sends `body` in chunked coding, cut into pieces of the given sizes (the last one
    /// repeated until the body is used up), with a terminating chunk.
    func sendChunked(_ body: Data, pieces: [Int]) throws {
        var offset = 0
        var index = 0
        while offset < body.count {
            let size = min(pieces[min(index, pieces.count - 1)], body.count - offset)
            try send(Array((String(size, radix: 16) + "\r\n").utf8))
            try send([UInt8](body[offset..<offset + size]))
            try send("\r\n")
            offset += size
            index += 1
        }
        try send("0\r\n\r\n")
    }

    func send(_ data: Data) throws {
        try send([UInt8](data))
    }
}

/// What a finished `curl` run left.
struct CurlRun {
    var exitCode: Int32
    var stdout: String
    var stderr: String
}

enum CurlError: Error {
    case timedOut
}

/// Whether the real curl binary is there to test against.
let curlAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")

/// Runs `/usr/bin/curl` with `arguments`, its output going to files in `directory`; kills it
/// and throws if it has not finished within `timeout`.
func runCurl(_ arguments: [String], in directory: TempDirectory, timeout: TimeInterval = 30) throws -> CurlRun {
    let name = UUID().uuidString
    let outURL = directory.file("\(name).out"), errURL = directory.file("\(name).err")
    _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
    let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
    defer {
        try? out.close()
        try? err.close()
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = arguments
    process.standardOutput = out
    process.standardError = err
    let finished = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in finished.signal() }
    try process.run()
    if finished.wait(timeout: .now() + timeout) == .timedOut {
        process.terminate()
        finished.wait()
        throw CurlError.timedOut
    }
    return CurlRun(exitCode: process.terminationStatus,
                   stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                   stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "")
}
