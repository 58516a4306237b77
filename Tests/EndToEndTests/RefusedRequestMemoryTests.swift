import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// A request the daemon refuses costs it nothing it keeps: after a 3.5 MB URL is refused
/// (-1000), transferd's resident memory returns near where it was (issue 28, item 9: such a
/// URL once left the daemon at 101 MB).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class RefusedRequestMemoryTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// VmRSS and VmHWM of `pid` in KiB, from /proc/PID/status.
    private func memory(of pid: Int32) -> (resident: Int, peak: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func field(_ name: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
        guard let resident = field("VmRSS"), let peak = field("VmHWM") else { return nil }
        return (resident, peak)
    }

    @Test("After a 3.5 MB URL is refused with -1000, transferd's resident memory is less than 2 MiB over what it was before")
    func refusedURLLeavesNoMemory() throws {
        let daemon = try DaemonUnderTest.start(container)
        server.serve("/small", data: testPayload(size: 1024))
        let delegate = RecordingDelegate()
        let session = fixture.session("memory", delegate: delegate)
        defer { session.invalidateAndCancel() }
        // A task through the daemon first, so that the baseline counts a session in use.
        let warm = session.downloadTask(with: server.url(for: "/small"))
        warm.resume()
        #expect(delegate.wait { if case .completed(warm.taskIdentifier, nil, _) = $0 { return true } else { return false } })
        let before = try #require(memory(of: daemon.pid))

        let long = try #require(URL(string: server.url(for: "/long").absoluteString + "?q=" + String(repeating: "a", count: 3_500_000)))
        let task = session.downloadTask(with: long)
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -1000, _) = $0 { return true } else { return false } }, "\(delegate.calls.count) calls, none a -1000 completion")
        // One more exchange, so that whatever the refusal freed has been given back by then.
        let after = session.downloadTask(with: server.url(for: "/small"))
        after.resume()
        #expect(delegate.wait { if case .completed(after.taskIdentifier, nil, _) = $0 { return true } else { return false } })
        let now = try #require(memory(of: daemon.pid))
        print("RefusedRequestMemoryTests: transferd VmRSS \(before.resident) KiB before, \(now.resident) KiB after the 3.5 MB URL (VmHWM \(before.peak) → \(now.peak) KiB)")
        #expect(now.resident - before.resident < 2 << 10, "VmRSS grew from \(before.resident) to \(now.resident) KiB")
    }

    @Test("A URL of exactly 64 KiB is taken and fetched; one byte more is refused with -1000")
    func urlBoundAtAndOnePast() throws {
        _ = try DaemonUnderTest.start(container)
        server.serve("/bound", data: testPayload(size: 1024))
        let delegate = RecordingDelegate()
        let session = fixture.session("url-bound", delegate: delegate)
        defer { session.invalidateAndCancel() }
        func url(bytes: Int) throws -> URL {
            let stem = server.url(for: "/bound").absoluteString + "?q="
            let url = try #require(URL(string: stem + String(repeating: "a", count: bytes - stem.utf8.count)))
            #expect(url.absoluteString.utf8.count == bytes)
            return url
        }
        let bound = 64 * 1024 // TransferLimits.urlBytes, as documented (Limits.md)
        #expect(TransferLimits.urlBytes == bound)
        let atTheLimit = session.downloadTask(with: try url(bytes: bound))
        atTheLimit.resume()
        var code: Int?? = nil
        #expect(delegate.wait {
            guard case .completed(atTheLimit.taskIdentifier, let error, _) = $0 else { return false }
            code = .some(error)
            return true
        })
        #expect(code == .some(nil), "a URL of \(bound) bytes is within the bound")
        let onePast = session.downloadTask(with: try url(bytes: bound + 1))
        onePast.resume()
        #expect(delegate.wait {
            if case .completed(onePast.taskIdentifier, -1000, _) = $0 { return true } else { return false }
        },
                "\(delegate.calls.count) calls, none a -1000 completion for a URL one byte past the bound")
    }
}
}
