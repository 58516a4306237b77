import Foundation
import TestPeers
import Testing

/// A server key the app accepted (S3.6) outlives the daemon: after transferd is SIGKILLed and
/// started again, the task goes on from its bytes on disk under the same acceptance, without
/// asking the app a second time.
@Suite(.timeLimit(.minutes(20)))
struct ServerTrustRestartTests {
    static let session = "com.example.host.fetch.background"

    @Test("A download from a server whose key the app accepted resumes after transferd is SIGKILLed, without a second server-trust challenge")
    func acceptedKeySurvivesRestart() async throws {
        try await onOwnThread {
            let certificates = try TestCertificates.shared.get()
            let nginx = try Nginx.start(sites: [Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted), directives: "limit_rate 1m;")])
            defer { nginx.stop() }
            let payload = try nginx.serve("report.bin", bytes: 5 << 20)
            let container = try TestContainer()
            defer { container.tearDown() }
            let daemon = try DaemonUnderTest.start(container)
            // The host's keychain trusts the test CA: its delegate accepts the chain for that key.
            #expect(try Executable.hostApp.run(["trust-certificate", certificates.caFile.path], in: container).status == 0)
            #expect(try Executable.fetchExtension.run(["download", nginx.url("private", "report.bin")], in: container, timeout: 60).status == 0)

            // Accepted (by the relaunched host) and part-way, with no app running: SIGKILL.
            let partial = container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer/\(Self.session)/task-1.partial")
            let partWay = waitUntil(timeout: 40) {
                (((try? FileManager.default.attributesOfItem(atPath: partial.path))?[.size] as? NSNumber)?.intValue ?? 0) > 1 << 20
                    && container.processesNamingContainer(executable: "host-app").isEmpty
            }
            try #require(partWay, "the download did not get a megabyte in after the app accepted the key: \(container.logEntries().suffix(20).map(\.message))")
            #expect(acceptedChallenges(in: container) == 1)
            daemon.process.kill(signal: SIGKILL)
            _ = daemon.process.wait(timeout: 10)

            _ = try DaemonUnderTest.start(container)
            let delivered = waitUntil(timeout: 60) {
                FileManager.default.contents(atPath: container.downloads.appendingPathComponent("report.bin").path) == payload
            }
            #expect(delivered, "the download was not delivered whole after the restart")
            #expect(challenges(in: container) == 1, "the app was asked about the server's key again after the restart")
            let requests = nginx.requests.filter { $0.uri.hasSuffix("report.bin") }
            #expect(requests.last.map { $0.status == 206 && $0.range.hasPrefix("bytes=") && $0.range != "bytes=0-" } == true, "resumed from the bytes on disk: \(requests)")
        }
    }

    /// Server-trust challenges the stand-ins' delegates received, and those they accepted.
    private func challenges(in container: TestContainer) -> Int {
        container.logEntries(category: "delegate").filter(\.isServerTrustChallenge).count
    }

    private func acceptedChallenges(in container: TestContainer) -> Int {
        container.logEntries(category: "delegate").filter(\.isAcceptedServerTrustChallenge).count
    }
}
