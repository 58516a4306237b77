import Foundation
import TestPeers
import Testing
import LoopbackServer
import TransferContainer

/// An event the app acknowledged is never handed to a delegate again, even when a power cut
/// takes the daemon's record of the acknowledgement (S3.4): the process's own record of what
/// its delegate saw (`delivered.json`) is on disk before it acknowledges.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct PowerCutDeliveryTests {
    static let session = "com.example.host.fetch.background"

    @Test("A power cut right after the extension acknowledged its download's event, before the daemon recorded it: the relaunched app does not see the event again",
          .enabled(if: PowerCutFileSystem.unavailableReason == nil, "skipped: /dev/fuse is absent (the power-cut test needs FUSE)"))
    func acknowledgedEventNotRepeated() async throws {
        try await onOwnThread { try self.runAcknowledgedEventCut() }
    }

    func runAcknowledgedEventCut() throws {
        let stage = try PowerCutStage(firstBacking: "backing")
        defer { stage.end() }
        let container = stage.container, base = stage.base
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 200_000, seed: 41)
        server.serve("/once.bin", data: payload)

        // The daemon freezes as the acknowledgement arrives: the journal still holds the event.
        let survivors = base.appendingPathComponent("survivors")
        let mounted = try stage.mount(backing: stage.firstBacking, survivors: survivors, marker: base.appendingPathComponent("cut.done"))
        let daemon = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--fault-freeze-on-acknowledgement"])
        let extensionProcess = try Executable.fetchExtension.start(["download", server.url(for: "/once.bin").absoluteString, "--wait"], in: container)
        let frozen = waitUntil(timeout: 60) { Self.isStopped(daemon.pid) }
        let seenBefore = completions(in: container, since: .distantPast)
        _ = try mounted.cut()
        stage.killProcesses()
        extensionProcess.kill()
        stage.unmount()
        try #require(frozen, "transferd never received the acknowledgement: \(extensionProcess.stdout)")
        try #require(seenBefore == 1, "the extension's delegate completed the task \(seenBefore) times before the cut")
        let left = try JournalContents.read(session: survivors.appendingPathComponent("Sessions/com.example.host/\(Self.session)"))
        try #require(left.events.count == 1, "the cut left the event undelivered in the journal, as it must for this test: \(left.events.keys.sorted())")

        // Power back: the daemon relaunches the app for the event it still holds.
        _ = try stage.mount(backing: survivors, survivors: base.appendingPathComponent("final"), marker: base.appendingPathComponent("final.done"))
        let restarted = Date()
        _ = try DaemonUnderTest.start(container)
        let handled = container.waitForCompletionHandler(of: "host-app", session: Self.session, timeout: 60)
        #expect(handled != nil, "the app was not relaunched for the session's event, or did not finish with it")
        #expect(waitUntil(timeout: 20) { container.pendingEvents(Self.session).isEmpty }, "the event is still pending: \(container.pendingEvents(Self.session))")
        let seenAfter = completions(in: container, since: restarted)
        #expect(seenAfter == 0, "the event the extension acknowledged before the cut reached a delegate again (\(seenAfter) times)")
    }

    /// How many times a delegate of the session completed task 1 (didCompleteWithError).
    private func completions(in container: TestContainer, since: Date) -> Int {
        container.logEntries(category: "delegate").filter {
            $0.time >= since && $0.session == Self.session && $0.task == 1 && $0.isDidCompleteWithError
        }.count
    }

    /// Whether `pid` is stopped by a signal (state T in /proc/PID/stat).
    static func isStopped(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.range(of: ") ", options: .backwards) else { return false }
        return stat[afterName.upperBound...].first == "T"
    }
}
