import Foundation
import Testing
import LoopbackServer
import TransferContainer
import TransferLogging
import ContainerInspection
import BackgroundTransferTesting
import Digests

/// Force quit versus termination by the system (S4.1, S4.2), and the background budget.
@Suite(.timeLimit(.minutes(20)))
struct TerminationTests {
    @Test("A force quit cancels the app's and its extensions' tasks, relaunches nothing, and the next user launch gets -999 with reason 0")
    func forceQuit() async throws {
        // Through BackgroundTransferTesting, as an adopter's test would do it (issue 29).
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/slow.bin", data: testPayload(size: 8 << 20), options: RouteOptions(bytesPerSecond: 256 << 10))

        try await device.launch("host-app", arguments: ["download", server.url(for: "/slow.bin").absoluteString]).succeeds(within: 60)
        try await device.launch("fetch-extension", arguments: ["download", server.url(for: "/slow.bin").absoluteString]).succeeds(within: 60)
        #expect(server.waitForRequests(count: 2, timeout: 10))
        #expect(try device.forceQuit("com.example.host") == 2)

        // No relaunch while force-quit: the daemon decides to leave both sessions' events to
        // the user, and says so, where it would otherwise have launched the app.
        let layout = ContainerLayout(root: device.root)
        let leftToUser = { Set(TransferLog.entries(layout: layout).filter { $0.process == "transferd" && $0.isRelaunchLeftToUser }.compactMap(\.session)) }
        #expect(waitUntil(timeout: 20) { leftToUser() == ["com.example.host.background", "com.example.host.fetch.background"] }, "\(leftToUser())")
        #expect(device.events.of("host-app").isEmpty && device.processes(named: "host-app").isEmpty, "relaunched while force-quit")
        #expect(ContainerSnapshot.read(layout).apps.filter(\.forceQuit).map(\.bundleIdentifier) == ["com.example.host", "com.example.host.fetch"])
        let inspect = try device.launch("bgtransfer", arguments: ["inspect"])
        try await inspect.succeeds(within: 30)
        #expect(inspect.output.contains("com.example.host [app] in com.example.host") && inspect.output.contains("force-quit (no relaunch until the user launches it)"), "\(inspect.output)")

        // The user launches the app: it takes the cancellations of both sessions.
        try await device.launch("host-app").succeeds(within: 60)
        let cancellations = device.events.of("host-app").filter { $0.kind == .didCompleteWithError && $0.errorCode == -999 && $0.cancelledReason == 0 }
        #expect(Set(cancellations.compactMap(\.session)) == ["com.example.host.background", "com.example.host.fetch.background"], "\(device.events.all)")
        try device.events.checkNothingDeliveredTwice()
        #expect(ContainerSnapshot.read(layout).apps.allSatisfy { !$0.forceQuit }, "a user launch ends the force quit")
    }

    @Test("An app launched for a session's events, as the daemon launches it, takes the force quit's cancellation, finishes the events and exits; that launch is no user launch, so the force quit stays")
    func launchForEventsIsNoUserLaunch() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/slow.bin", data: testPayload(size: 4 << 20), options: RouteOptions(bytesPerSecond: 256 << 10))
        try await device.launch("host-app", arguments: ["download", server.url(for: "/slow.bin").absoluteString]).succeeds(within: 60)
        #expect(try device.forceQuit("com.example.host") == 1)

        let app = try device.launchForBackgroundEvents("host-app", session: "com.example.host.background")
        try await app.succeeds(within: 60) // exits once it has called the completion handler
        let calls = device.events.of("host-app").filter { $0.pid == app.pid }
        #expect(calls.map(\.kind) == [.handleEventsForBackgroundURLSession, .didCompleteWithError, .didFinishEvents], "\(calls)")
        let cancellation = calls.first { $0.kind == .didCompleteWithError }
        #expect(cancellation?.errorCode == -999 && cancellation?.cancelledReason == 0)
        try device.events.checkAppleOrder()
        #expect(ContainerSnapshot.read(ContainerLayout(root: device.root)).apps.contains { $0.bundleIdentifier == "com.example.host" && $0.forceQuit })
    }

    @Test("An app launched for events that hangs past its background budget is killed; the next launch gets the events")
    func backgroundBudget() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/b.bin", data: testPayload(size: 64 << 10))
        let marker = container.parent.appendingPathComponent("hung-once").path
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--background-budget", "1"], environment: ["HOST_APP_MISBEHAVE_ONCE": "hang:" + marker])

        #expect(try Executable.fetchExtension.run(["download", server.url(for: "/b.bin").absoluteString], in: container).status == 0)
        let killed = container.waitForLog { $0.process == "transferd" && $0.isBudgetExpired }
        #expect(killed != nil, "the hung app was terminated")
        let acknowledged = container.waitForCompletionHandler(of: "host-app")
        #expect(acknowledged != nil, "a second launch took the events")
        let finished = container.logEntries(process: "host-app", category: "delegate").filter { $0.isDidFinishDownloading(task: 1) }
        #expect(finished.count == 1, "seen once: \(finished.map(\.message))")
    }
}

/// The foreground-to-background handover from a real process.
@Suite(.timeLimit(.minutes(20)))
struct HandoverProcessTests {
    @Test("host-app download --foreground: when its time runs out the download goes on in the background from its bytes, and the relaunched host gets the file")
    func foregroundTimeRunsOut() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 3 << 20, seed: 71)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20
        server.serve("/movie.bin", data: payload, options: slow)
        _ = try DaemonUnderTest.start(container)

        let outcome = try Executable.hostApp.run(["download", server.url(for: "/movie.bin").absoluteString, "--foreground", "--time-limit", "0.6"], in: container)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        #expect(outcome.stdout.contains("handed over to background task 1 (from"), "\(outcome.stdout)")

        let acknowledged = container.waitForCompletionHandler(of: "host-app")
        try #require(acknowledged != nil, "the host was relaunched for its background session")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("movie.bin").path) == SHA256.hexDigest(of: payload))
        let requests = server.requests.filter { $0.path == "/movie.bin" }
        #expect(requests.count == 2)
        #expect(requests.last?.header("Range")?.hasPrefix("bytes=") == true && requests.last?.header("Range") != "bytes=0-", "continued from the bytes on disk")
        #expect(server.bytesSent <= Int64(payload.count) + (256 << 10), "nothing fetched twice (sent \(server.bytesSent))")
    }
}
