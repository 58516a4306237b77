import Foundation
import TestPeers
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import Digests

/// Links that stall (issue 20, S6.4): `timeoutIntervalForRequest` is the idle time between
/// bytes, as Apple has it. A server that sends its head and then nothing, or stops part-way
/// through the body, is caught by it and retried from the bytes on disk; a link that
/// trickles a byte every few seconds under a longer idle timeout is never cut.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class StallTests: InProcessSuite, @unchecked Sendable {

    @Test("Headers then nothing: timed out after the idle timeout, retried, delivered whole once the server answers")
    func stallAfterHeadersIsRetried() async throws {
        try await onOwnThread { [self] in
            let payload = testPayload(size: 64 << 10, seed: 5)
            server.serve("/quiet.bin", data: payload, options: RouteOptions(stallAfterBytes: 0))
            let delegate = RecordingDelegate()
            let session = fixture.session("quiet", delegate: delegate) { $0.timeoutIntervalForRequest = 1 }
            let task = session.downloadTask(with: server.url(for: "/quiet.bin"))
            task.resume()
            let retried = container.waitForRetries(1, of: task.taskIdentifier, in: "quiet", family: InProcess.family.rawValue)
            #expect(retried?.retryCause.map { if case .networkTrouble(TransferFailure.timedOut, _) = $0 { true } else { false } } == true, "a stall is an idle timeout: \(String(describing: retried?.retryCause))")
            #expect(!delegate.calls.contains { if case .completed = $0 { return true } else { return false } }, "a stall is retried, not delivered")
            server.serve("/quiet.bin", data: payload)
            #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, 200) = $0 { return true } else { return false } }, "\(delegate.calls)")
            #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
            session.invalidateAndCancel()
        }
    }

    @Test("A body that stops part-way: timed out, resumed with Range from the bytes on disk, the file whole")
    func stallMidBodyResumesFromDisk() async throws {
        try await onOwnThread { [self] in
            let payload = testPayload(size: 1 << 20, seed: 6)
            let stallAt: Int64 = 256 << 10
            server.serve("/stall.bin", data: payload, options: RouteOptions(stallAfterBytes: stallAt))
            let delegate = RecordingDelegate()
            let session = fixture.session("stall", delegate: delegate) { $0.timeoutIntervalForRequest = 1 }
            let task = session.downloadTask(with: server.url(for: "/stall.bin"))
            task.resume()
            let retried = container.waitForRetries(1, of: task.taskIdentifier, in: "stall", family: InProcess.family.rawValue)
            #expect(retried?.retryCause.map { if case .networkTrouble(TransferFailure.timedOut, _) = $0 { true } else { false } } == true, "a stall is an idle timeout: \(String(describing: retried?.retryCause))")
            server.serve("/stall.bin", data: payload)
            #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
            #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
            #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload), "the bytes before the stall and after the resume make the file")
            let requests = server.requests.filter { $0.path == "/stall.bin" }
            #expect(requests.count == 2, "\(requests.map { $0.header("Range") ?? "-" })")
            let offset = requests.last?.header("Range").flatMap { Int64($0.dropFirst("bytes=".count).dropLast()) }
            #expect(requests.last?.header("Range")?.hasSuffix("-") == true && (offset ?? 0) > 0 && (offset ?? 0) <= stallAt,
                    "the retry asked for the rest: \(requests.last?.header("Range") ?? "no Range")")
            #expect(requests.last?.header("If-Range") != nil)
            session.invalidateAndCancel()
        }
    }

    @Test("A byte every 1.5 s under a 3 s idle timeout is never cut (libcurl's low-speed average would have cut it)")
    func trickleIsNotCut() async throws {
        try await onOwnThread { [self] in
            let payload = Data("slow".utf8)
            server.serve("/trickle", data: payload, options: RouteOptions(trickleInterval: 1.5))
            let delegate = RecordingDelegate()
            let session = fixture.session("trickle", delegate: delegate) { $0.timeoutIntervalForRequest = 3 }
            let task = session.downloadTask(with: server.url(for: "/trickle"))
            task.resume()
            #expect(delegate.wait(timeout: 30) { if case .completed(task.taskIdentifier, nil, 200) = $0 { return true } else { return false } }, "\(delegate.calls)")
            #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
            #expect(server.requests.filter { $0.path == "/trickle" }.count == 1, "one request, never retried")
            session.invalidateAndCancel()
        }
    }
}
}
