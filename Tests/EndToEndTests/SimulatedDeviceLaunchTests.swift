import Foundation
import Testing
import TestPeers
import TransferContainer
import TransferLogging
import TransferPOSIX
import BackgroundTransferTesting

/// The testing kit runs one copy of a program at a time, as iOS runs one copy of an app.
@Suite(.timeLimit(.minutes(20)))
struct SimulatedDeviceLaunchTests {
    @Test("A user launch while a copy launched for background events still runs waits for that copy to exit, then opens the session, instead of failing with -996")
    func userLaunchWaitsForTheRelaunchedCopy() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let daemon = try #require(device.processes(named: "transferd").first)
        let layout = ContainerLayout(root: device.root)
        let identifier = "com.example.host.background"
        let lock = layout.sessionLock(family: try BundleIdentifier("com.example.host"), identifier: try SessionIdentifier(identifier)).path

        // With the daemon stopped, the copy launched for events holds the session, waiting for an answer.
        kill(daemon, SIGSTOP)
        let copy: LaunchedProcess
        do {
            copy = try device.launchForBackgroundEvents("host-app", session: identifier)
            try #require(waitUntil(timeout: 20) { FileLock.isHeld(lock) }, "the copy launched for events did not take the session")
        } catch {
            kill(daemon, SIGCONT)
            throw error
        }

        // The user launches the app meanwhile: the launch waits for the copy instead of starting a second one.
        let userLaunch = Task { try await onOwnThread { try device.launch("host-app") } }
        let secondCopy = waitUntil(timeout: 1) { device.processes(named: "host-app").count > 1 }
        kill(daemon, SIGCONT)
        #expect(!secondCopy, "a second copy of host-app started while the copy launched for events ran")
        try await copy.succeeds(within: 60)
        let user = try await userLaunch.value
        try await user.succeeds(within: 60) // it opened the session: no -996

        let opened = TransferLog.entries(layout: layout).filter { $0.process == "transferd" && $0.session == identifier && $0.event?.kind == .sessionOpened }
        #expect(opened.map(\.event?.pid) == [copy.pid, user.pid], "the copy, then the user launch, opened the session: \(opened.map(\.message))")
    }
}
