import Foundation
import TestPeers
import Testing
import TransferPOSIX

/// HTTPS through the daemon, as an extension runs it (S2.6, S3.6): a chain from a private CA
/// that nobody trusts fails with -1202 and no file is delivered; the app accepts it from its
/// keychain, attached or relaunched for the challenge; a root installed on the device is
/// trusted by every app; transfers go over HTTP/2, share one connection per origin and resume.
@Suite(.timeLimit(.minutes(20)))
struct HTTPSProcessTests {
    /// nginx with one site of the test CA, a file to serve, and a container with its daemon.
    struct Stage {
        let certificates: TestCertificates
        let nginx: Nginx
        let container: TestContainer
        let payload: Data
        /// Whether the daemon takes the test CA as a root for every app (`--trusted-roots`).
        let deviceTrustsCA: Bool
        var url: String { nginx.url("private", "report.bin") }

        init(bytes: Int = 100_000, directives: String = "", deviceTrustsCA: Bool = false) throws {
            certificates = try TestCertificates.shared.get()
            nginx = try Nginx.start(sites: [Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted), directives: directives)])
            payload = try nginx.serve("report.bin", bytes: bytes)
            container = try TestContainer()
            self.deviceTrustsCA = deviceTrustsCA
            try startDaemon()
        }

        func startDaemon() throws {
            _ = try DaemonUnderTest.start(container, trustedRoots: deviceTrustsCA ? certificates.caFile : nil)
        }

        func stop() {
            container.tearDown()
            nginx.stop()
        }

        /// The delivered file, if any.
        var delivered: Data? { FileManager.default.contents(atPath: container.downloads.appendingPathComponent("report.bin").path) }
    }

    @Test("With the CA in the host's keychain (host-app trust-certificate), fetch-extension --wait accepts the chain for that key and downloads it whole over HTTP/2; one request reaches nginx")
    func keychainAcceptsWhileAttached() async throws {
        try await onOwnThread {
            let stage = try Stage()
            defer { stage.stop() }
            let trusted = try Executable.hostApp.run(["trust-certificate", stage.certificates.caFile.path], in: stage.container)
            #expect(trusted.status == 0, "\(trusted.stderr)")
            let outcome = try Executable.fetchExtension.run(["download", stage.url, "--wait"], in: stage.container, timeout: 60)
            #expect(outcome.status == 0, "\(outcome.stdout)\n\(outcome.stderr)")
            #expect(stage.delivered == stage.payload)
            let requests = stage.nginx.requests
            #expect(requests.count == 1 && requests.first?.status == 200 && requests.first?.protocolName == "HTTP/2.0", "\(requests)")
            #expect(stage.container.logEntries(process: "fetch-extension").contains { $0.isAcceptedServerTrustChallenge })
        }
    }

    @Test("An extension that exits leaves the server-trust challenge to its app: host-app is relaunched, answers from its keychain, and the file arrives")
    func keychainAcceptsWhenRelaunched() async throws {
        try await onOwnThread {
            let stage = try Stage()
            defer { stage.stop() }
            #expect(try Executable.hostApp.run(["trust-certificate", stage.certificates.caFile.path], in: stage.container).status == 0)
            // Offline until the extension has exited, so that the challenge cannot reach the
            // extension's own delegate while it is still attached.
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "offline"], in: stage.container).status == 0)
            let started = try Executable.fetchExtension.run(["download", stage.url], in: stage.container, timeout: 60)
            #expect(started.status == 0, "\(started.stderr)")
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: stage.container).status == 0)
            #expect(waitUntil(timeout: 60) { stage.delivered == stage.payload }, "\(stage.container.logEntries().suffix(30).map(\.message))")
            #expect(stage.container.logEntries(process: "host-app").contains { $0.isAcceptedServerTrustChallenge })
            #expect(stage.nginx.requests.map(\.status) == [200])
        }
    }

    @Test("A CA in the keychain trusts only the chains that end in it: a self-signed server is still refused, with -1203, and sees no request")
    func keychainDoesNotTrustOthers() async throws {
        try await onOwnThread {
            let certificates = try TestCertificates.shared.get()
            let nginx = try Nginx.start(sites: [Nginx.Site(name: "self", certificate: certificates.certificateFile(.selfSigned), key: certificates.keyFile(.selfSigned))])
            defer { nginx.stop() }
            try nginx.serve("report.bin", bytes: 1000)
            let container = try TestContainer()
            defer { container.tearDown() }
            _ = try DaemonUnderTest.start(container)
            #expect(try Executable.hostApp.run(["trust-certificate", certificates.caFile.path], in: container).status == 0)
            let outcome = try Executable.fetchExtension.run(["download", nginx.url("self", "report.bin"), "--wait"], in: container, timeout: 60)
            #expect(outcome.status != 0 && (outcome.stdout + outcome.stderr).contains("-1203"), "\(outcome.stdout)\n\(outcome.stderr)")
            #expect(nginx.requests.isEmpty)
        }
    }

    @Test("A root installed on the device is trusted by every app without a challenge; downloads of one session share one HTTP/2 connection, and a download resumes over HTTPS with a range after transferd is SIGKILLed")
    func deviceRootHTTP2AndResume() async throws {
        try await onOwnThread {
            let stage = try Stage(bytes: 6 << 20, directives: "limit_rate 2m;", deviceTrustsCA: true)
            defer { stage.stop() }
            // Several small files from one session first: one connection.
            for index in 0..<4 { try stage.nginx.serve("small-\(index).bin", bytes: 20_000, seed: UInt32(index + 7)) }
            for index in 0..<4 {
                #expect(try Executable.hostApp.run(["download", stage.nginx.url("private", "small-\(index).bin"), "--wait"], in: stage.container, timeout: 60).status == 0)
            }
            let small = stage.nginx.requests
            #expect(small.count == 4 && Set(small.map(\.connection)).count == 1 && small.allSatisfy { $0.protocolName == "HTTP/2.0" }, "\(small)")
            #expect(!stage.container.logEntries().contains { $0.isServerTrustChallenge }, "no challenge for a root the device trusts")

            // A large one, cut by a SIGKILL of the daemon part-way.
            #expect(try Executable.hostApp.run(["download", stage.url], in: stage.container, timeout: 60).status == 0)
            let caches = stage.container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer")
            let partWay = waitUntil(timeout: 30) {
                let files = (FileManager.default.enumerator(atPath: caches.path)?.allObjects as? [String]) ?? []
                return files.contains { name in
                    let size = (try? FileManager.default.attributesOfItem(atPath: caches.appendingPathComponent(name).path)[.size] as? Int) ?? 0
                    return size > 1 << 20
                }
            }
            try #require(partWay, "a megabyte on disk before the kill")
            let pids = stage.container.processesNamingContainer(executable: "transferd")
            for pid in pids { kill(pid, SIGKILL) }
            #expect(waitUntil(timeout: 10) { !FileLock.isHeld(stage.container.layout.daemonLock.path) })
            try stage.startDaemon()
            #expect(waitUntil(timeout: 60) {
                _ = try? Executable.hostApp.run([], in: stage.container, timeout: 30)
                return stage.delivered == stage.payload
            }, "delivered whole after the kill")
            let large = stage.nginx.requests.filter { $0.uri.hasSuffix("report.bin") }
            #expect(large.contains { $0.status == 206 && $0.range.hasPrefix("bytes=") && $0.range != "bytes=0-" && $0.protocolName == "HTTP/2.0" }, "\(large)")
        }
    }

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

    @Test("A 401 over HTTP/2 asks the app, which answers from its keychain; the retried request carries the credential and the file arrives (nginx auth_basic)")
    func authenticationOverHTTP2() async throws {
        try await onOwnThread {
            let hash = try PeerProcess.run("/usr/bin/openssl", ["passwd", "-apr1", "s3cret"], in: FileManager.default.temporaryDirectory).trimmingCharacters(in: .whitespacesAndNewlines)
            let users = FileManager.default.temporaryDirectory.appendingPathComponent("htpasswd-\(UUID().uuidString.prefix(8))")
            try "alice:\(hash)\n".write(to: users, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: users) }
            let stage = try Stage(directives: "auth_basic \"vault\"; auth_basic_user_file \(users.path);", deviceTrustsCA: true)
            defer { stage.stop() }
            #expect(try Executable.hostApp.run(["remember-password", "vault", "alice", "s3cret"], in: stage.container).status == 0)
            let outcome = try Executable.hostApp.run(["download", stage.url, "--wait"], in: stage.container, timeout: 60)
            #expect(outcome.status == 0, "\(outcome.stdout)\n\(outcome.stderr)")
            #expect(stage.delivered == stage.payload)
            let requests = stage.nginx.requests
            #expect(requests.map(\.status) == [401, 200] && requests.allSatisfy { $0.protocolName == "HTTP/2.0" }, "\(requests)")
        }
    }

    @Test("An upload over HTTP/2 through the daemon: nginx (WebDAV PUT) stores exactly the file's bytes")
    func uploadOverHTTP2() async throws {
        try await onOwnThread {
            let stage = try Stage(directives: "dav_methods PUT; create_full_put_path on; client_max_body_size 64m;", deviceTrustsCA: true)
            defer { stage.stop() }
            let body = testPayload(size: 3 << 20, seed: 77)
            let file = stage.container.root + "/upload.bin"
            try body.write(to: URL(fileURLWithPath: file))
            let url = stage.nginx.url("private", "incoming/upload.bin")
            let outcome = try Executable.fetchExtension.run(["upload", file, url, "--method", "PUT", "--wait"], in: stage.container, timeout: 60)
            #expect(outcome.status == 0, "\(outcome.stdout)\n\(outcome.stderr)")
            #expect(FileManager.default.contents(atPath: stage.nginx.files.appendingPathComponent("incoming/upload.bin").path) == body)
            let puts = stage.nginx.requests.filter { $0.method == "PUT" }
            #expect(puts.count == 1 && puts.first?.status == 201 && puts.first?.protocolName == "HTTP/2.0", "\(stage.nginx.requests)")
        }
    }
}
