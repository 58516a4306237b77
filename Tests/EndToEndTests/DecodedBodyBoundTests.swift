import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import TransferPOSIX

extension InProcess {
/// What a decoder may make of one response body (issue 45, item 2): a default session's data
/// task whose server sends `Content-Encoding: gzip` gets a body decoding to 64 MiB whole, and
/// ends with -1103 one byte past it; a 256 MiB gzip bomb (about 260 KB on the wire) ends there too,
/// without the app receiving more than the bound. Bodies made by the system's gzip, served by
/// the loopback server.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class DecodedBodyBoundTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// `count` zero bytes, gzipped by /usr/bin/gzip (within 120 s).
    private func gzippedZeros(_ count: Int) throws -> Data {
        let file = container.root + "/zeros-\(count).gz"
        let made = try Executable(name: "sh", path: "/bin/sh")
            .start(["-c", "head -c \(count) /dev/zero | gzip -c > '\(file)'"], in: container, passContainer: false)
            .wait(timeout: 120)
        try #require(made.status == 0, "gzip: \(made.stderr)")
        return try Data(contentsOf: URL(fileURLWithPath: file))
    }

    /// Runs a completion-handler data task for `path` in a default session; its body's size
    /// and error code, within 120 s.
    private func fetch(_ path: String) throws -> (bytes: Int?, code: Int?) {
        let session = URLSession(configuration: .default)
        defer { session.invalidateAndCancel() }
        let outcome = Locked<(bytes: Int?, code: Int?)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: server.url(for: path)) { data, _, error in
            outcome.withLock { $0 = (data?.count, (error as? URLError)?.errorCode) }
            done.signal()
        }
        task.resume()
        try #require(done.wait(timeout: .now() + 120) == .success, "the task for \(path) did not end in 120 s")
        return try #require(outcome.withLock { $0 })
    }

    @Test("A gzip body decoding to exactly 64 MiB is handed to the completion handler whole; one decoding to 64 MiB + 1 ends with -1103 and no data")
    func boundAtAndOnePast() throws {
        let bound = 64 << 20 // TransferLimits.decodedBodyBytes, as documented (Limits.md)
        #expect(TransferLimits.decodedBodyBytes == Int64(bound))
        var options = RouteOptions()
        options.extraHeaders = [("Content-Encoding", "gzip")]
        server.serve("/at.gz", data: try gzippedZeros(bound), options: options)
        server.serve("/past.gz", data: try gzippedZeros(bound + 1), options: options)

        let at = try fetch("/at.gz")
        #expect(at.code == nil && at.bytes == bound, "at the bound: \(at)")
        let past = try fetch("/past.gz")
        #expect(past.code == -1103 && past.bytes == nil, "one past the bound: \(past)")
    }

    // A quarter of the issue's 1 GiB bomb, four times the bound: making 1 GiB through gzip
    // took most of the test's 74 s beside two CPU hogs, on the whole suite's longest path.
    @Test("A 256 MiB gzip bomb sent chunked to a delegate's data task ends with -1103, the delegate having received at most 64 MiB and a piece")
    func bombEndsAtTheBound() throws {
        let bomb = try gzippedZeros(256 << 20)
        var options = RouteOptions(omitContentLength: true)
        options.extraHeaders = [("Content-Encoding", "gzip")]
        server.serve("/bomb.gz", data: bomb, options: options)
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        defer { session.invalidateAndCancel() }
        let started = Date()
        let task = session.dataTask(with: server.url(for: "/bomb.gz"))
        task.resume()
        var code: Int?? = nil
        #expect(delegate.wait(timeout: 120) {
            guard case .completed(task.taskIdentifier, let error, _) = $0 else { return false }
            code = .some(error)
            return true
        }, "the task did not end")
        let received = delegate.calls.reduce(0) { total, call in
            if case .receivedData(task.taskIdentifier, let count) = call { total + count } else { total }
        }
        print("DecodedBodyBoundTests: a \(bomb.count)-byte gzip bomb of 256 MiB ended with \(String(describing: code)) after \(received) decoded bytes, in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        #expect(code == .some(-1103), "\(String(describing: code))")
        #expect(received <= (64 << 20) + (1 << 20), "the delegate received \(received) bytes")
    }
}
}
