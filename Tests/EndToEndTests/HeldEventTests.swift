import Foundation
import Testing
@testable import BackgroundTransfer
import TransferContainer

/// S3.2 in the library, against a real daemon: in a process launched for a session's events,
/// an event that comes after `urlSessionDidFinishEvents` belongs to the app's next batch. It
/// reaches no delegate here, and the completion handler does not acknowledge it: the daemon
/// keeps it for the next launch.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class HeldEventTests: InProcessSuite, @unchecked Sendable {
    @Test("A download that ends after urlSessionDidFinishEvents, in a process launched for the session's events, is held: no delegate call, not acknowledged by the completion handler, still pending in the daemon")
    func eventAfterFinishEventsIsHeld() throws {
        let name = "held-after-finish-events"
        let identifier = try SessionIdentifier(name)
        BackgroundLaunch.markLaunched(for: identifier) // as `deliverBackgroundLaunch` does
        server.serve("/late.bin", data: testPayload(size: 20_000, seed: 61))
        let delegate = RecordingDelegate()
        let session = fixture.session(name, delegate: delegate)
        let core = try #require(session.core as? SessionCore)
        #expect(delegate.wait { $0 == .finishedEvents }, "the launch's batch (empty) announced: \(delegate.calls)")

        session.downloadTask(with: server.url(for: "/late.bin")).resume()
        // The event reached this process: held, or (were it not) handed to the delegate.
        let completed = { delegate.calls.contains { if case .completed = $0 { true } else { false } } }
        let reached = waitUntil(timeout: 30) { core.state.withLock { $0.launch?.held.count } == 1 || completed() }
        try #require(reached, "the event did not reach the process: \(delegate.calls)")

        core.completionHandlerCalled(generation: 0, staying: false)
        #expect(core.waitForAnswers(timeout: 20), "whatever the handler sent was answered")
        #expect(!completed(), "\(delegate.calls)")
        #expect(delegate.calls.filter { $0 == .finishedEvents }.count == 1)
        let directory = container.layout.sessionDirectory(family: InProcess.family, identifier: identifier)
        #expect(try JournalContents.read(session: directory).events.keys.sorted() == [1], "event 1 waits for the next launch")
        let record = try? JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("delivered.json"))) as? [String: Any]
        #expect(((record?["deliveredThrough"] as? NSNumber)?.intValue ?? 0) == 0, "not recorded as delivered: \(String(describing: record))")
    }
}
}
