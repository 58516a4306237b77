import Foundation
import Testing
import LoopbackServer
import TransferContainer
import TransferPOSIX
import Digests

/// A crashed on-demand daemon comes back with the next launch of any app, as nsurlsessiond
/// is always there on iOS (issue 44): also a launch that opens no session.
@Suite(.timeLimit(.minutes(20)))
struct DaemonComebackTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("A user launch opening no session brings back a killed daemon; the extension's download is delivered")
    func userLaunchBringsDaemonBack() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 512 << 10, seed: 4401)
        server.serve("/comeback.bin", data: payload, options: RouteOptions(etag: "\"c1\"", stallAfterBytes: 64 << 10))

        // The extension starts the download and exits; the daemon it started on demand stalls on it.
        let url = server.url(for: "/comeback.bin").absoluteString
        let started = try Executable.fetchExtension.run(["download", url], in: container)
        try #require(started.status == 0, "\(started.stderr)")
        try #require(server.waitForRequests(count: 1, timeout: 20), "the download reached the server")
        let daemons = container.processesNamingContainer(executable: "transferd")
        try #require(daemons.count == 1, "one daemon, started on demand: \(daemons)")
        try killAndWait(daemons[0])
        try #require(UnfinishedWork.first(in: container.layout)?.tasksToCarryOn == 1, "the task is left unfinished")

        // The link recovers; the user launches the host for something that opens no session.
        server.serve("/comeback.bin", data: payload, options: RouteOptions(etag: "\"c1\""))
        let app = try Executable.hostApp.start(["remember-password", "realm", "user", "secret"], in: container)
        let launch = app.wait(timeout: 60)
        #expect(launch.status == 0, "\(launch.stderr)")
        // On a loaded machine a daemon slow to bind can have a second one started beside it,
        // which finds the daemon lock held and exits: one stays.
        var back: [Int32] = []
        let one = waitUntil(timeout: 30) {
            back = container.processesNamingContainer(executable: "transferd")
            return back.count == 1
        }
        #expect(one && back != daemons, "a new daemon serves the container as the launch ends: \(back)")
        let opened = container.logEntries(process: "transferd").filter { $0.isSessionOpened(by: app.pid) }
        #expect(opened.isEmpty, "the launch opened no session")

        // The daemon carries the task on, and launches the host for the extension's events (S1.6).
        let acknowledged = container.waitForCompletionHandler(of: "host-app", session: Self.fetchSession, timeout: 60)
        try #require(acknowledged != nil, "the host was launched for the extension's events and called the handler")
        let file = container.downloads.appendingPathComponent("comeback.bin").path
        #expect(try SHA256.hexDigest(ofFile: file) == SHA256.hexDigest(of: payload))
        #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty }, "the event was acknowledged")
    }

    @Test("A launch in a container whose work is all done starts no daemon: it only looks at the container")
    func nothingPendingStartsNoDaemon() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/done.bin", data: testPayload(size: 16 << 10, seed: 4402))

        // A session with a journal, its task finished and its event acknowledged.
        let url = server.url(for: "/done.bin").absoluteString
        let done = try Executable.fetchExtension.run(["download", url, "--wait"], in: container)
        try #require(done.status == 0, "\(done.stderr)")
        try #require(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty })
        let daemons = container.processesNamingContainer(executable: "transferd")
        try #require(daemons.count == 1)
        try killAndWait(daemons[0])
        let journal = JournalContents.path(inSession: container.sessionDirectory(Self.fetchSession))
        try #require(FileManager.default.fileExists(atPath: journal), "the session has a journal to look at")
        #expect(UnfinishedWork.first(in: container.layout) == nil)

        let launch = try Executable.hostApp.run(["remember-password", "realm", "user", "secret"], in: container)
        #expect(launch.status == 0, "\(launch.stderr)")
        #expect(container.processesNamingContainer(executable: "transferd").isEmpty, "no daemon was started")
        let answer = try? UnixSocket.connect(to: container.layout.daemonSocket.path)
        answer?.close()
        #expect(answer == nil, "nothing answers at the socket")
    }

    /// SIGKILLs the daemon `pid` (named by its command line as the container's) and waits for its end.
    private func killAndWait(_ pid: Int32) throws {
        let handle = try ProcessHandle.open(pid: pid)
        defer { handle.close() }
        kill(pid, SIGKILL)
        try #require(handle.waitForExit(within: 10), "transferd \(pid) ended")
    }
}
