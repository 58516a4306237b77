import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

extension InProcess {
/// S2.2 through the API: a delegate data task of a background session, against a real
/// daemon and a real loopback server.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class BackgroundDataTaskAPITests: InProcessSuite, @unchecked Sendable {

    @Test("A background session's data task is suspended until resume, gets its body through didReceive data, then didCompleteWithError(nil); getAllTasks lists it while it runs; its identifier is none of the daemon's tasks'")
    func dataTaskInBackgroundSession() throws {
        let payload = testPayload(size: 400_000, seed: 501)
        var throttled = RouteOptions()
        throttled.bytesPerSecond = 100_000 // four seconds: long enough to be listed while it runs
        server.serve("/data.bin", data: payload, options: throttled)
        let delegate = RecordingDelegate()
        let session = fixture.session("data-tasks", delegate: delegate)
        let download = session.downloadTask(with: server.url(for: "/data.bin"))
        let data = session.dataTask(with: server.url(for: "/data.bin"))
        let upload = session.uploadTask(with: URLRequest(url: server.url(for: "/data.bin")), fromFile: URL(fileURLWithPath: "/nonexistent"))
        #expect(Set([download.taskIdentifier, data.taskIdentifier, upload.taskIdentifier]).count == 3, "one numbering for the session")
        #expect(data.state == .suspended)
        #expect(!server.waitForRequests(count: 1, timeout: 0.5), "a suspended data task makes no request")

        data.resume()
        #expect(delegate.wait { if case .receivedData(data.taskIdentifier, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        let listed = allTasks(session)
        #expect(listed?.contains { $0 === data } == true, "getAllTasks lists the running data task: \(listed?.map(\.taskIdentifier) ?? []), data task \(data.taskIdentifier) \(data.state)")
        #expect(listed?.contains { $0 === download } == true, "and the daemon's task beside it")

        #expect(delegate.wait { if case .completed(data.taskIdentifier, _, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        let calls = delegate.calls.filter { call in
            switch call {
            case .receivedData(data.taskIdentifier, _), .completed(data.taskIdentifier, _, _): true
            default: false
            }
        }
        #expect(calls.last == .completed(task: data.taskIdentifier, code: nil, status: 200), "didCompleteWithError(nil) last: \(calls)")
        #expect(delegate.receivedBodies[data.taskIdentifier] == payload, "the whole body, in order")
        #expect(data.state == .completed)
        #expect(allTasks(session)?.contains { $0 === data } == false, "a finished data task is not listed")
        session.invalidateAndCancel()
    }

    @Test("A data task still running when invalidateAndCancel is called ends with -999")
    func invalidateCancelsDataTask() throws {
        var throttled = RouteOptions()
        throttled.bytesPerSecond = 16 << 10
        server.serve("/slow.bin", data: testPayload(size: 1 << 20, seed: 502), options: throttled)
        let delegate = RecordingDelegate()
        let session = fixture.session("data-cancel", delegate: delegate)
        let data = session.dataTask(with: server.url(for: "/slow.bin"))
        data.resume()
        #expect(delegate.wait { if case .receivedData(data.taskIdentifier, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        session.invalidateAndCancel()
        #expect(delegate.wait { $0 == .completed(task: data.taskIdentifier, code: -999, status: 200) }, "\(delegate.calls)")
    }
}
}
