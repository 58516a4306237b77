import Foundation
import Testing
import BackgroundTransfer

/// One app's unfinished tasks are bounded, all its sessions together: past the cap a new task
/// is refused with -1011 naming the app and the cap, and a task that ends makes room again.
/// The cap is the daemon's `--max-tasks-per-app`, set low here so that no test makes 200,000
/// records; real daemon, real sessions of this test app.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class TaskQuotaTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    required init() throws {
        try super.init()
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--max-tasks-per-app", "3"])
    }

    @Test("With a cap of 3 tasks per app, a fourth task in another session of the app fails with -1011 naming the app and the cap; once one ends, a new one is accepted and completes")
    func fourthTaskRefused() throws {
        server.serve("/ok.bin", data: testPayload(size: 10_000))
        let firstDelegate = RecordingDelegate()
        let first = fixture.session("quota.one", delegate: firstDelegate)
        defer { first.invalidateAndCancel() }
        let secondDelegate = RecordingDelegate()
        let second = fixture.session("quota.two", delegate: secondDelegate)
        defer { second.invalidateAndCancel() }

        // Three unfinished (suspended) tasks, in two sessions.
        let kept = first.downloadTask(with: server.url(for: "/ok.bin"))
        _ = first.downloadTask(with: server.url(for: "/ok.bin"))
        _ = second.downloadTask(with: server.url(for: "/ok.bin"))
        #expect(first.waitUntilDurable(timeout: 10) && second.waitUntilDurable(timeout: 10), "the three tasks are accepted")

        let refused = second.downloadTask(with: server.url(for: "/ok.bin"))
        refused.resume()
        #expect(secondDelegate.wait(timeout: 20) { if case .completed(refused.taskIdentifier, _, _) = $0 { true } else { false } }, "the fourth task completed")
        let error = secondDelegate.errors[refused.taskIdentifier] as? URLError
        #expect(error?.errorCode == -1011, "\(String(describing: error))")
        let message = error?.localizedDescription ?? ""
        #expect(message.contains(InProcess.app.bundleIdentifier.rawValue) && message.contains("(3)"), "names the app and the cap: \(message)")

        // A task that ends makes room: a new one is accepted and downloads.
        kept.resume()
        #expect(firstDelegate.wait(timeout: 20, for: completed(kept, status: 200)), "\(firstDelegate.calls)")
        let next = second.downloadTask(with: server.url(for: "/ok.bin"))
        next.resume()
        #expect(secondDelegate.wait(timeout: 20, for: completed(next, status: 200)), "\(secondDelegate.calls)")
    }
}
}
