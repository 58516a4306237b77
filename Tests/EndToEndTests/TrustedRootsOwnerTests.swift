import Foundation
import Glibc
import TestPeers
import Testing
import TransferContainer
import TransferLogging
import TransferPOSIX

/// Who may install a root every app trusts (WhoMayDoWhat.md): the container's
/// `Daemon/trusted-roots.pem` installs its roots only when root owns it, no group or other may
/// write it and it has one name, as a profile is the administrator's on iOS; the file of
/// `transferd --trusted-roots` installs them for the daemon started with it, not for one a
/// client starts on demand. Judged by a download from a server the test CA certified (-1202
/// when the CA is not installed) and by the log's typed fact (`deviceRootsRefused`).
@Suite(.timeLimit(.minutes(20)))
struct TrustedRootsOwnerTests {
    static let needsRoot: Comment = "a root-owned file, and one given to another user, need the tests to run as root"

    /// nginx with the test CA's site, a small file and a slow one, and a container.
    struct Stage {
        let ca: Data
        let nginx: Nginx
        let container: TestContainer
        let slow: Data
        var roots: URL { container.layout.deviceTrustedRoots }

        init() throws {
            let certificates = try TestCertificates.shared.get()
            ca = try Data(contentsOf: certificates.caFile)
            let site = Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted),
                                  key: certificates.keyFile(.trusted), directives: "limit_rate 256k;")
            nginx = try Nginx.start(sites: [site])
            _ = try nginx.serve("small.bin", bytes: 10_000)
            slow = try nginx.serve("slow.bin", bytes: 3 << 20, seed: 5)
            container = try TestContainer()
        }

        func stop() {
            container.tearDown()
            nginx.stop()
        }

        /// Writes the CA at `path` afresh with exactly `mode` (no umask), given to `owner` if set.
        func plantCA(at path: URL, mode: mode_t = 0o644, owner: uid_t? = nil) throws {
            try? FileManager.default.removeItem(at: path)
            try ca.write(to: path)
            try #require(chmod(path.path, mode) == 0, "chmod \(path.path): errno \(errno)")
            if let owner { try #require(chown(path.path, owner, owner) == 0, "chown \(path.path): errno \(errno)") }
        }

        /// `fetch-extension download small.bin --wait`: whether it arrived, and what it said.
        func fetchSmall() throws -> (arrived: Bool, said: String) {
            let outcome = try Executable.fetchExtension.run(["download", nginx.url("private", "small.bin"), "--wait"],
                                                            in: container, timeout: 60)
            return (outcome.status == 0, outcome.stdout + outcome.stderr)
        }

        /// `bgtransfer conditions`: the daemon reads the roots again.
        func conditionsChanged() throws {
            let conditions = try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container,
                                                           timeout: 30)
            #expect(conditions.status == 0, "\(conditions.stderr)")
        }

        /// The refusals the daemon logged so far (category `trust`), read as typed facts.
        var refusals: [LogEvent.RootsRefusal] {
            container.logEntries(process: "transferd", category: "trust").compactMap { entry in
                entry.event?.kind == .deviceRootsRefused ? entry.event?.rootsRefusal : nil
            }
        }
    }

    @Test("""
        Daemon/trusted-roots.pem with the CA owned by uid 65534, mode 0666, 0664 or 0646, or with a second \
        hard link, installs nothing: -1202 for the CA's server and a typed refusal naming the owner, mode \
        or links; transferd keeps running and a download accepted before finishes whole
        """, .enabled(if: getuid() == 0, needsRoot))
    func refusedByOwnerModeOrLinks() async throws {
        try await onOwnThread {
            let stage = try Stage()
            defer { stage.stop() }
            // The CA installed as an administrator does first, so the accepted download is an HTTPS one.
            try stage.plantCA(at: stage.roots)
            let daemon = try DaemonUnderTest.start(stage.container)
            let accepted = try Executable.hostApp.run(["download", stage.nginx.url("private", "slow.bin")],
                                                      in: stage.container, timeout: 60)
            #expect(accepted.status == 0, "\(accepted.stderr)")
            let path = stage.roots.path
            let secondName = stage.container.parent.appendingPathComponent("second-name.pem")
            let plantings: [(name: String, plant: () throws -> Void, expected: LogEvent.RootsRefusal)] = [
                ("owner 65534", { try stage.plantCA(at: stage.roots, owner: 65534) },
                 LogEvent.RootsRefusal(.owner, path: path, owner: 65534, mode: 0o644, links: 1)),
                ("mode 0666", { try stage.plantCA(at: stage.roots, mode: 0o666) },
                 LogEvent.RootsRefusal(.writableByOthers, path: path, owner: 0, mode: 0o666, links: 1)),
                ("mode 0664", { try stage.plantCA(at: stage.roots, mode: 0o664) },
                 LogEvent.RootsRefusal(.writableByOthers, path: path, owner: 0, mode: 0o664, links: 1)),
                ("mode 0646", { try stage.plantCA(at: stage.roots, mode: 0o646) },
                 LogEvent.RootsRefusal(.writableByOthers, path: path, owner: 0, mode: 0o646, links: 1)),
                ("two links", {
                    try stage.plantCA(at: stage.roots)
                    try? FileManager.default.removeItem(at: secondName)
                    try #require(link(stage.roots.path, secondName.path) == 0, "link: errno \(errno)")
                }, LogEvent.RootsRefusal(.links, path: path, owner: 0, mode: 0o644, links: 2)),
            ]
            for planting in plantings {
                let before = stage.refusals.count
                try planting.plant()
                try stage.conditionsChanged()
                #expect(kill(daemon.pid, 0) == 0, "\(planting.name): transferd is still running")
                let fetched = try stage.fetchSmall()
                #expect(!fetched.arrived && fetched.said.contains("-1202"),
                        "\(planting.name): the CA was installed: \(fetched.said)")
                #expect(waitUntil(timeout: 10) { stage.refusals.dropFirst(before).contains(planting.expected) },
                        "\(planting.name): refused as \(planting.expected); logged \(stage.refusals.dropFirst(before))")
            }
            // The administrator's file again: the download accepted before finishes whole, by the same daemon.
            try? FileManager.default.removeItem(at: secondName)
            try stage.plantCA(at: stage.roots)
            try stage.conditionsChanged()
            let delivered = stage.container.downloads.appendingPathComponent("slow.bin")
            #expect(waitUntil(timeout: 60) {
                _ = try? Executable.hostApp.run([], in: stage.container, timeout: 30)
                return FileManager.default.contents(atPath: delivered.path) == stage.slow
            }, "the download accepted before was delivered whole")
            #expect(kill(daemon.pid, 0) == 0, "the same transferd delivered it")
        }
    }

    @Test("""
        Daemon/trusted-roots.pem with the CA, owned by root, mode 0644, one link: installed, the CA's \
        server's file arrives without a challenge
        """, .enabled(if: getuid() == 0, needsRoot))
    func rootOwnedFileInstalls() async throws {
        try await onOwnThread {
            let stage = try Stage()
            defer { stage.stop() }
            try stage.plantCA(at: stage.roots)
            _ = try DaemonUnderTest.start(stage.container)
            let fetched = try stage.fetchSmall()
            #expect(fetched.arrived, "\(fetched.said)")
            #expect(stage.refusals.isEmpty, "\(stage.refusals)")
        }
    }

    @Test("""
        transferd --trusted-roots FILE (the test's own, 0644) installs the CA for that daemon; a daemon a \
        client then starts on demand does not have it: -1202
        """)
    func optionInstallsForItsDaemonOnly() async throws {
        try await onOwnThread {
            let stage = try Stage()
            defer { stage.stop() }
            let file = stage.container.parent.appendingPathComponent("ca.pem")
            try stage.plantCA(at: file)
            let daemon = try DaemonUnderTest.start(stage.container, trustedRoots: file)
            let withOption = try stage.fetchSmall()
            #expect(withOption.arrived, "\(withOption.said)")

            daemon.process.kill()
            _ = daemon.process.wait(timeout: 10)
            let lock = stage.container.layout.daemonLock.path
            try #require(waitUntil(timeout: 10) { !FileLock.isHeld(lock) }, "the daemon is gone")
            let onDemand = try stage.fetchSmall()
            #expect(!onDemand.arrived && onDemand.said.contains("-1202"), "\(onDemand.said)")
            let daemons = stage.container.processesNamingContainer(executable: "transferd")
            #expect(daemons.count == 1 && !daemons.contains(daemon.pid), "a daemon was started on demand: \(daemons)")
        }
    }

    @Test("""
        transferd --trusted-roots FILE that its group or others may write (0664, 0646) installs nothing, \
        with a typed refusal; 0644 installs it; as root, one owned by uid 65534 installs nothing
        """)
    func optionFileRefusals() async throws {
        try await onOwnThread {
            let stage = try Stage()
            defer { stage.stop() }
            let file = stage.container.parent.appendingPathComponent("ca.pem")
            try stage.plantCA(at: file, mode: 0o664)
            let daemon = try DaemonUnderTest.start(stage.container, trustedRoots: file)
            var plantings: [(mode: mode_t, owner: uid_t?, reason: LogEvent.RootsRefusal.Reason?)] = [
                (0o664, nil, .writableByOthers), (0o646, nil, .writableByOthers), (0o644, nil, nil),
            ]
            // Another user's file can be made only by root; the daemon's own user is root then.
            if getuid() == 0 { plantings.append((0o644, 65534, .owner)) }
            for (index, planting) in plantings.enumerated() {
                // The first file was read as the daemon started.
                let before = index == 0 ? 0 : stage.refusals.count
                if index > 0 {
                    try stage.plantCA(at: file, mode: planting.mode, owner: planting.owner)
                    try stage.conditionsChanged()
                }
                let owner = planting.owner.map(String.init) ?? "the test's"
                let label = "mode \(String(planting.mode, radix: 8)), owner \(owner)"
                let fetched = try stage.fetchSmall()
                guard let reason = planting.reason else {
                    #expect(fetched.arrived, "\(label): \(fetched.said)")
                    continue
                }
                #expect(!fetched.arrived && fetched.said.contains("-1202"), "\(label): \(fetched.said)")
                #expect(waitUntil(timeout: 10) {
                    stage.refusals.dropFirst(before).contains {
                        $0.reason == reason && $0.path == file.path && $0.mode == UInt32(planting.mode)
                    }
                }, "\(label): refused as \(reason); logged \(stage.refusals.dropFirst(before))")
            }
            #expect(kill(daemon.pid, 0) == 0, "transferd is still running")
        }
    }
}
