import Foundation
import TestPeers
import Testing
import TransferContainer

/// HTTPS through the daemon, as an extension runs it (S2.6): a chain from a private CA that
/// nobody trusts fails with -1202, and no file is delivered.
@Suite(.timeLimit(.minutes(2)))
struct HTTPSProcessTests {
    @Test("fetch-extension download https://… --wait from a server with a private CA exits non-zero and says -1202; no request reached the server")
    func untrustedChainRefused() async throws {
        try await onOwnThread {
            let certificates = try TestCertificates.shared.get()
            let nginx = try Nginx.start(sites: [Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted))])
            defer { nginx.stop() }
            try nginx.serve("report.bin", bytes: 100_000)
            let container = try TestContainer()
            defer { container.tearDown() }
            _ = try DaemonUnderTest.start(container)
            let outcome = try Executable.fetchExtension.run(["download", nginx.url("private", "report.bin"), "--wait"], in: container, timeout: 60)
            #expect(outcome.status != nil && outcome.status != 0, "\(outcome.stdout)\n\(outcome.stderr)")
            #expect((outcome.stdout + outcome.stderr).contains("-1202"), "\(outcome.stdout)\n\(outcome.stderr)")
            #expect(nginx.requests.isEmpty)
            let downloads = container.root + "/Downloads"
            let delivered = (try? FileManager.default.subpathsOfDirectory(atPath: downloads)) ?? []
            #expect(!delivered.contains { $0.hasSuffix("report.bin") }, "\(delivered)")
        }
    }
}
