import Foundation
import TestPeers
import Testing

/// S3.2 with held challenges: an app relaunched for tasks held on server-trust challenges
/// answers them, and the tasks it ends that way are events of the same launch:
/// `urlSessionDidFinishEvents` comes once, after their `didCompleteWithError`.
@Suite(.timeLimit(.minutes(20)))
struct FinishEventsOrderTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("Two tasks held on server-trust challenges, their extension killed: host-app is relaunched, refuses both (-1202), and hears urlSessionDidFinishEvents once, after both didCompleteWithError")
    func finishEventsAfterAnsweredChallenges() async throws {
        try await onOwnThread {
            let certificates = try TestCertificates.shared.get()
            // The private CA's chain: no system store trusts it, nor the host's empty keychain.
            let nginx = try Nginx.start(sites: [Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted))])
            defer { nginx.stop() }
            try nginx.serve("one.bin", bytes: 10_000, seed: 1)
            try nginx.serve("two.bin", bytes: 10_000, seed: 2)
            let container = try TestContainer()
            defer { container.tearDown() }
            _ = try DaemonUnderTest.start(container)

            // Offline, the tasks wait; the second extension holds the session, stopped, while
            // both tasks meet the server and are held on their challenges (asked of it, unanswered).
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "offline"], in: container).status == 0)
            let first = try Executable.fetchExtension.run(["download", nginx.url("private", "one.bin")], in: container)
            #expect(first.status == 0, "\(first.stderr)")
            let holder = try Executable.fetchExtension.start(["download", nginx.url("private", "two.bin"), "--wait"], in: container)
            defer { holder.kill() }
            try #require(container.waitForStartedDownload(pid: holder.pid) != nil, "\(holder.stderr)")
            holder.kill(signal: SIGSTOP)
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container).status == 0)
            let held = waitUntil(timeout: 30) {
                [1, 2].allSatisfy { container.task($0, in: Self.fetchSession)?.pendingChallenge?.serverTrust != nil }
            }
            try #require(held, "both tasks held on a server-trust challenge: \(container.logEntries().suffix(20).map(\.message))")

            // The extension dies with the questions unanswered: its app is launched for them.
            holder.kill(signal: SIGKILL)
            _ = holder.wait(timeout: 10)
            let acknowledged = container.waitForCompletionHandler(of: "host-app", session: Self.fetchSession, timeout: 60)
            try #require(acknowledged != nil, "host-app was not relaunched, or did not call its completion handler")
            #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty }, "the completion handler acknowledged both events")

            let calls = container.logEntries(process: "host-app").filter { $0.isDidCompleteWithError || $0.isDidFinishEvents }
            let completions = calls.filter(\.isDidCompleteWithError)
            #expect(completions.compactMap(\.task).sorted() == [1, 2], "\(calls.map(\.message))")
            #expect(completions.allSatisfy { $0.completionCode == -1202 }, "\(completions.map(\.message))")
            #expect(calls.filter(\.isDidFinishEvents).count == 1, "once: \(calls.map(\.message))")
            #expect(calls.last?.isDidFinishEvents == true, "after every didCompleteWithError: \(calls.map(\.message))")
            #expect(nginx.requests.isEmpty, "no request reached a server nobody trusts")
        }
    }
}
