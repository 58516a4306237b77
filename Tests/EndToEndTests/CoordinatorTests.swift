import Foundation
import Testing
import LoopbackServer

/// One process per session (S1.5), and identifiers that are refused before they touch the disk (S1.1).
@Suite(.timeLimit(.minutes(20)))
struct CoordinatorTests {
    @Test("A second process opening a held identifier gets -996 naming the identifier and the holder's pid")
    func contentionBetweenTwoProcesses() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var slow = RouteOptions()
        slow.bytesPerSecond = 1 << 20
        server.serve("/slow", data: testPayload(size: 4 << 20), options: slow)
        server.serve("/other", data: Data("other".utf8))
        _ = try DaemonUnderTest.start(container)

        let holder = try Executable.fetchExtension.start(["download", server.url(for: "/slow").absoluteString, "--wait"], in: container)
        try #require(container.waitForStartedDownload(pid: holder.pid) != nil)

        let second = try Executable.fetchExtension.run(["download", server.url(for: "/other").absoluteString], in: container)
        #expect(second.status == 2)
        #expect(second.stderr.contains("com.example.host.fetch.background"), "names the identifier: \(second.stderr)")
        #expect(second.stderr.contains("pid \(holder.pid)"), "names the holder: \(second.stderr)")
        #expect(second.stderr.contains("-996"), "\(second.stderr)")
        holder.kill()
    }

    @Test("Bad session identifiers are refused with a clear error and nothing is created outside the container",
          arguments: ["", "..", "a/b", "../escape", "/absolute", String(repeating: "x", count: 300)])
    func badIdentifiers(_ identifier: String) throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let before = try FileManager.default.contentsOfDirectory(atPath: container.parent.path).filter { !$0.hasSuffix(".out") && !$0.hasSuffix(".err") }

        let outcome = try Executable.fetchExtension.run(["download", "http://127.0.0.1:9/x", "--session", identifier], in: container)
        #expect(outcome.status == 2)
        #expect(outcome.stderr.contains("invalid session identifier"), "\(outcome.stderr)")

        let after = try FileManager.default.contentsOfDirectory(atPath: container.parent.path).filter { !$0.hasSuffix(".out") && !$0.hasSuffix(".err") }
        #expect(before == after, "nothing new beside the container")
        let families = (try? FileManager.default.contentsOfDirectory(atPath: container.layout.sessionsDirectory.path)) ?? []
        for family in families {
            let sessions = (try? FileManager.default.contentsOfDirectory(atPath: container.layout.sessionsDirectory.appendingPathComponent(family).path)) ?? []
            #expect(sessions.isEmpty, "no session folder was made: \(sessions)")
        }
    }

    @Test("A second transferd on the same container exits with a clear message")
    func oneDaemonPerContainer() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let first = try DaemonUnderTest.start(container)
        let second = try Executable.transferd.run([], in: container, timeout: 20)
        #expect(second.status == 3)
        #expect(second.stderr.contains("already serving the container"), "\(second.stderr)")
        #expect(second.stderr.contains("pid \(first.pid)"), "\(second.stderr)")
    }
}
