import Foundation
import Testing
import BackgroundTransferTesting

/// The testing kit's trust in its test CA holds whoever runs the tests: the device's daemon
/// takes the CA by `--trusted-roots` (a root-owned `Daemon/trusted-roots.pem` would need root),
/// at once while it runs and again after a restart.
@Suite(.timeLimit(.minutes(20)))
struct SimulatedDeviceTrustTests {
    @Test("""
        Before trustTestCertificateAuthority() the CA's server fails with -1202; after it the running \
        daemon fetches its file, and so does the daemon after restartDaemon()
        """)
    func trustedAtOnceAndAfterRestart() async throws {
        let device = try await SimulatedDevice()
        defer { device.shutDown() }
        let server = try TestHTTPSServer()
        defer { server.stop() }
        for name in ["before.bin", "running.bin", "restarted.bin"] { try server.serve(name, bytes: 10_000) }
        func fetch(_ name: String) throws -> LaunchedProcess {
            try device.launch("fetch-extension",
                              arguments: ["download", server.url(for: name).absoluteString, "--wait"])
        }

        let untrusted = try fetch("before.bin")
        let status = try await untrusted.exitStatus(within: 60)
        let said = untrusted.output + untrusted.errorOutput
        #expect(status != 0 && said.contains("-1202"), "\(said)")

        try device.trustTestCertificateAuthority()
        try await fetch("running.bin").succeeds(within: 60)
        try await device.restartDaemon()
        try await fetch("restarted.bin").succeeds(within: 60)
    }
}
