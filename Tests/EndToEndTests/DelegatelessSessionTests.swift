import Foundation
import Testing
import LoopbackServer
import TransferContainer
import TransferLogging

/// A background session opened with no delegate (S1.2): allowed, as on Apple's systems, but
/// never silent about the events it acknowledges undelivered (issue 44).
@Suite(.timeLimit(.minutes(20)))
struct DelegatelessSessionTests {
    static let session = "com.example.host.background"

    @Test("No delegate: one stderr line per session says events are acknowledged undelivered; inspect shows it")
    func eventsWithoutDelegate() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let slow = RouteOptions(bytesPerSecond: 256 << 10)
        server.serve("/slow.bin", data: testPayload(size: 1 << 20, seed: 4403), options: slow)
        server.serve("/fast.bin", data: testPayload(size: 16 << 10, seed: 4404))
        let slowURL = server.url(for: "/slow.bin").absoluteString
        let fastURL = server.url(for: "/fast.bin").absoluteString
        _ = try DaemonUnderTest.start(container)

        // Two tasks, so two events for the process that stays: the first starts and leaves,
        // the second joins it and waits until the session has no unfinished task.
        let first = try Executable.hostApp.run(["download", slowURL, "--no-delegate"], in: container)
        try #require(first.status == 0, "\(first.stderr)")
        let second = try Executable.hostApp.run(["download", fastURL, "--wait", "--no-delegate"], in: container)
        #expect(second.status == 0, "\(second.stderr)")
        let told = second.stderr.split(separator: "\n").filter { $0.contains("has no delegate") }
        #expect(told.count == 1, "once for the session's two events: \(second.stderr)")
        let named = told.first.map { $0.contains(Self.session) && $0.contains("acknowledged without being delivered") }
        #expect(named == true, "\(told)")
        #expect(waitUntil { container.pendingEvents(Self.session).isEmpty }, "both events were acknowledged")
        let delivery = container.logEntries(process: "host-app", category: "delivery")
        let logged = delivery.filter { $0.event?.kind == .eventsWithoutDelegate }
        #expect(logged.count == 1, "\(logged.map(\.message))")

        #expect(try inspect(container).contains("opened without a delegate"))
        #expect(try inspectedFlag(container) == true)

        // A process with a delegate opens it: the mark goes.
        let third = try Executable.hostApp.run(["download", fastURL, "--wait"], in: container)
        #expect(third.status == 0, "\(third.stderr)")
        #expect(!third.stderr.contains("has no delegate"))
        #expect(try !inspect(container).contains("opened without a delegate"))
        #expect(try inspectedFlag(container) == false)
    }

    private func inspect(_ container: TestContainer) throws -> String {
        let outcome = try Executable.bgtransfer.run(["inspect"], in: container)
        try #require(outcome.status == 0, "\(outcome.stderr)")
        return outcome.stdout
    }

    /// `openedWithoutDelegate` of the host's session in `inspect --json`.
    private func inspectedFlag(_ container: TestContainer) throws -> Bool? {
        let outcome = try Executable.bgtransfer.run(["inspect", "--json"], in: container)
        try #require(outcome.status == 0, "\(outcome.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(outcome.stdout.utf8)) as? [String: Any]
        let sessions = document?["sessions"] as? [[String: Any]] ?? []
        return sessions.first { $0["identifier"] as? String == Self.session }?["openedWithoutDelegate"] as? Bool
    }
}
