import Foundation
import Glibc
import TestPeers
import Testing
import TransferContainer

/// `Daemon/trusted-roots.pem` is the device administrator's setting, taken only from a
/// root-owned file (`TrustedRootsOwnerTests`); even such a file cannot stop the daemon, lose
/// an accepted task, or have the daemon read a file elsewhere through a symlink or swallow a
/// file of any size (issue 28). Run as root: the test's files are root-owned, so each is
/// refused for what it is, not for its owner.
@Suite(.timeLimit(.minutes(20)))
struct TrustedRootsAttackTests {
    @Test("""
        A 64 MiB trusted-roots.pem (the CA, then padding), garbage, and a symlink to the CA elsewhere: each \
        is not installed (-1202 for the CA's server), the daemon keeps running, and a download accepted \
        before finishes whole
        """, .enabled(if: getuid() == 0, "the honest trusted-roots.pem must be root-owned (CI runs as root)"))
    func hostileTrustedRoots() async throws {
        try await onOwnThread {
            let certificates = try TestCertificates.shared.get()
            let nginx = try Nginx.start(sites: [Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted), directives: "limit_rate 256k;")])
            defer { nginx.stop() }
            _ = try nginx.serve("small.bin", bytes: 10_000)
            let slow = try nginx.serve("slow.bin", bytes: 3 << 20, seed: 5)
            let container = try TestContainer()
            defer { container.tearDown() }
            // The CA installed honestly first, so the accepted download is an HTTPS one the attacks could break.
            let roots = container.layout.deviceTrustedRoots
            try FileManager.default.copyItem(at: certificates.caFile, to: roots)
            let daemon = try DaemonUnderTest.start(container)
            #expect(try Executable.hostApp.run(["download", nginx.url("private", "slow.bin")], in: container, timeout: 60).status == 0)

            let ca = try Data(contentsOf: certificates.caFile)
            let elsewhere = URL(fileURLWithPath: container.root).deletingLastPathComponent().appendingPathComponent("ca-elsewhere.pem")
            try ca.write(to: elsewhere)
            let attacks: [(name: String, plant: () throws -> Void)] = [
                ("64 MiB", {
                    try? FileManager.default.removeItem(at: roots)
                    var huge = ca
                    huge.append(Data(repeating: UInt8(ascii: "\n"), count: 64 << 20))
                    try huge.write(to: roots)
                }),
                ("garbage", {
                    try? FileManager.default.removeItem(at: roots)
                    try testPayload(size: 100_000, seed: 9).write(to: roots)
                }),
                ("symlink", {
                    try? FileManager.default.removeItem(at: roots)
                    try FileManager.default.createSymbolicLink(at: roots, withDestinationURL: elsewhere)
                }),
            ]
            for attack in attacks {
                try attack.plant()
                let conditions = try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container, timeout: 30)
                #expect(conditions.status == 0, "\(attack.name): \(conditions.stderr)")
                #expect(kill(daemon.pid, 0) == 0, "\(attack.name): transferd is still running")
                let outcome = try Executable.fetchExtension.run(["download", nginx.url("private", "small.bin"), "--wait"], in: container, timeout: 60)
                #expect(outcome.status != 0 && (outcome.stdout + outcome.stderr).contains("-1202"), "\(attack.name): the CA was installed from it: \(outcome.stdout)\n\(outcome.stderr)")
            }
            #expect(kill(daemon.pid, 0) == 0, "transferd is still running")
            // The honest CA again: the download accepted before the attacks finishes whole.
            try? FileManager.default.removeItem(at: roots)
            try FileManager.default.copyItem(at: certificates.caFile, to: roots)
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container, timeout: 30).status == 0)
            let delivered = container.downloads.appendingPathComponent("slow.bin")
            #expect(waitUntil(timeout: 60) {
                _ = try? Executable.hostApp.run([], in: container, timeout: 30)
                return FileManager.default.contents(atPath: delivered.path) == slow
            }, "the download accepted before the attacks was delivered whole")
            #expect(kill(daemon.pid, 0) == 0, "the same transferd delivered it")
        }
    }
}
