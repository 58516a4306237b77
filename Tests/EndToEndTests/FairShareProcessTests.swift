import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import ContainerInspection
import TransferCoding

/// Fair shares of the daemon's transfer slots between apps (issue 28 item 5), with a real
/// daemon, real trickling servers and a second app as its own process.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class FairShareProcessTests: InProcessSuite, @unchecked Sendable {
    /// The daemon runs at `info`: the line the timeline draws a slot wait from is an info line.
    override class var startsDaemon: Bool { false }

    required init() throws {
        try super.init()
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--log-level", "info"])
    }

    @Test("One app's 40 downloads from a server trickling a byte every 0.9 s do not keep another app's 1 MiB download from starting: it completes within 30 s; the tasks left without a slot say so, and behind whom, in inspect, watch and the log line the timeline draws")
    func tricklesDoNotStarveAnotherApp() throws {
        server.serve("/trickle.bin", data: testPayload(size: 4096, seed: 1), options: RouteOptions(trickleInterval: 0.9))
        // The other app's server: libcurl queues transfers to one origin behind a connection
        // that is still answering, so the trickles' server would hold it back on its own.
        let other = try LoopbackServer()
        defer { other.stop() }
        other.serve("/megabyte.bin", data: testPayload(size: 1 << 20, seed: 2))
        let delegate = RecordingDelegate()
        let hog = fixture.session("hog", delegate: delegate) { $0.httpMaximumConnectionsPerHost = 40 }
        let tasks = (0..<40).map { _ in hog.downloadTask(with: server.url(for: "/trickle.bin")) }
        for task in tasks { task.resume() }
        defer { hog.invalidateAndCancel() }
        // The daemon's 32 slots are all the test app's: the 8 tasks left over wait for a slot
        // behind the session holding them, typed, in `inspect --json`, and `watch --once`
        // shows the same value.
        let behindHog = TaskHold.waitingForSlot(behind: [SlotHolder(family: InProcess.family.rawValue, session: "hog", transfers: 32)])
        var holds: [String: TaskHold] = [:]
        let inspected = waitUntil(timeout: 10) {
            guard let listed = try? Executable.bgtransfer.run(["inspect", "--json", "--session", "hog"], in: self.container),
                  let snapshot = try? RecordCoding.decode(ContainerSnapshot.self, from: Data(listed.stdout.utf8)) else { return false }
            holds = snapshot.sessions.first?.holds ?? [:]
            return holds.values.filter { $0 == behindHog }.count == 8
        }
        try #require(inspected, "8 tasks wait for a slot behind hog's 32: \(holds)")
        let watched = try Executable.bgtransfer.run(["watch", "--once", "--session", "hog"], in: container)
        #expect(watched.stdout.components(separatedBy: "\n").filter { $0.contains(behindHog.description) }.count == 8, "\(watched.stdout)")
        // The timeline's source: the daemon's log line with the same typed fact.
        #expect(container.waitForLog(timeout: 10) { $0.process == "transferd" && $0.session == "hog" && $0.hold == behindHog } != nil)

        // Another app, as its own process, downloads 1 MiB and waits for it.
        let host = try Executable.hostApp.start(["download", other.url(for: "/megabyte.bin").absoluteString, "--wait"], in: container)
        let outcome = host.wait(timeout: 30)
        #expect(outcome.status == 0, "host-app's download did not complete within 30 s (status \(String(describing: outcome.status))): \(outcome.stderr)")
        #expect(other.requests.contains { $0.path == "/megabyte.bin" })
        // The test app keeps the rest: its transfers go on.
        #expect(!delegate.calls.contains { if case .completed = $0 { return true } else { return false } }, "no trickle was ended: \(delegate.calls)")
    }
}
}
