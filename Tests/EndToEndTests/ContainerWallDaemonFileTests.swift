import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer

/// What the daemon writes in `Daemon/` (its run record, the app registry, the crash guard's
/// mark) is written there, never through a link another program of the user planted in its
/// place: the file the link points at stays as it was, and the daemon runs (issue 28).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ContainerWallDaemonFileTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// A file outside the container, with known contents.
    private func outsideFile(_ name: String) throws -> (url: URL, contents: Data) {
        let url = container.parent.appendingPathComponent("\(name)-\(UUID().uuidString).txt")
        let contents = Data("the host's own data\n".utf8)
        try contents.write(to: url)
        return (url, contents)
    }

    /// Replaces `Daemon/<name>` with a symlink to `target`.
    private func plant(_ name: String, to target: URL) throws {
        let file = container.layout.daemonDirectory.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: file)
        try FileManager.default.createSymbolicLink(at: file, withDestinationURL: target)
    }

    @Test("crashed-on, transferd.run and apps.json planted as links to files outside: a crash and a restart write none of those files, and the restarted daemon runs a download")
    func plantedDaemonFiles() throws {
        var options = RouteOptions()
        options.extraHeaders = [("X-Crash-Daemon", "1")]
        server.serve("/crash", data: Data("boom".utf8), options: options)
        server.serve("/healthy.bin", data: testPayload(size: 32 << 10, seed: 3))

        // A daemon that crashes on the task, with a link in place of its crash mark.
        let crashing = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--fault-crash-on-response-header", "X-Crash-Daemon"])
        defer { crashing.process.kill() }
        let mark = try outsideFile("mark")
        try plant("crashed-on", to: mark.url)
        let created = try Executable.hostApp.start(["download", server.url(for: "/crash").absoluteString, "--begin-after", "1"], in: container).wait(timeout: 60)
        try #require(created.status == 0, "\(created.stderr)")
        #expect(crashing.process.wait(timeout: 30).status.map { $0 != 0 } == true, "the daemon crashed on the task")
        #expect(try Data(contentsOf: mark.url) == mark.contents, "the crash guard wrote its mark through the link")

        // The next daemon, with links in place of its run record and the app registry.
        let run = try outsideFile("run"), registry = try outsideFile("apps")
        try plant("transferd.run", to: run.url)
        try plant("apps.json", to: registry.url)
        let daemon = try DaemonUnderTest.start(container)
        defer { daemon.process.kill() }
        let healthy = try Executable.hostApp.run(["download", server.url(for: "/healthy.bin").absoluteString, "--wait"], in: container)
        #expect(healthy.status == 0, "the daemon runs: \(healthy.stderr)")
        #expect(try Data(contentsOf: run.url) == run.contents, "the daemon wrote its run record through the link")
        #expect(try Data(contentsOf: registry.url) == registry.contents, "the daemon wrote the app registry through the link")
    }
}
}
