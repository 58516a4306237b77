import Foundation
import TestPeers
import TransferContainer

/// Debian's nginx (`TestPeers.Nginx`) for the benchmark: one site over TLS + HTTP/2 with the
/// test CA's certificate for 127.0.0.1, and the same files over plain HTTP/1.1 on a second
/// port of the same server block, so both sides of a figure fetch from one process.
/// `sendfile` is on (it serves the plain port without a copy through user space).
/// Stopped by its pid in `stop()`. The certificates are made once per process
/// (`TestCertificates.shared`); main.swift removes them at the end (`removeCertificates`).
struct BenchNginx {
    static let site = "bench"

    let nginx: Nginx
    let certificates: TestCertificates
    let plainPort: Int

    init() throws {
        guard Nginx.isInstalled else { throw BenchError("\(Nginx.executable) is missing: apt-get install nginx-light") }
        let certificates: TestCertificates
        switch TestCertificates.shared {
        case .success(let made): certificates = made
        case .failure(let failure): throw BenchError("cannot make the test certificates: \(failure)")
        }
        let reservation = try PortReservation() // held until nginx listens: see PortReservation
        defer { reservation.release() }
        let plainPort = reservation.port
        let site = Nginx.Site(name: Self.site, certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted),
                              directives: "listen 127.0.0.1:\(plainPort);\n    sendfile on;")
        nginx = try Nginx.start(sites: [site])
        guard PeerProcess.wait(until: Date() + 20, { PeerProcess.accepts(port: plainPort) }) else {
            nginx.stop()
            throw BenchError("nginx does not accept on its plain port \(plainPort)")
        }
        self.certificates = certificates
        self.plainPort = plainPort
    }

    /// The test CA, for `curl --cacert` and the daemon's `--trusted-roots`.
    var caFile: String { certificates.caFile.path }

    /// https://127.0.0.1:PORT/path (TLS, HTTP/2 offered by ALPN).
    func httpsURL(_ path: String) -> String { nginx.url(Self.site, path) }

    /// http://127.0.0.1:PORT/path (plain HTTP/1.1).
    func httpURL(_ path: String) -> String { "http://127.0.0.1:\(plainPort)/\(path)" }

    /// Where a served file goes.
    func path(of name: String) -> String { nginx.files.appendingPathComponent(name).path }

    /// Runs `body` with a scratch container whose daemon trusts the test CA (started with
    /// `--trusted-roots` naming it, which works for any user; its pid), nginx, and the
    /// benchmark's app in that container. nginx and the container's processes are ended by pid
    /// afterwards, whatever `body` does.
    static func withTrustingDaemon(entitlements: String, _ body: (BenchContainer, BenchNginx, Int32, BenchApp) throws -> Void) throws {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let nginx = try BenchNginx()
        defer { nginx.stop() }
        let daemon = try container.startDaemon(options: ["--trusted-roots", nginx.caFile])
        try body(container, nginx, daemon, try BenchApp(entitlements: entitlements, container: container))
    }

    /// The access log's requests so far (one line a finished request).
    var requests: [Nginx.Request] { nginx.requests }

    func stop() {
        nginx.stop()
    }

    /// Removes the process's test certificates, if they were made.
    static func removeCertificates() {
        if case .success(let certificates) = TestCertificates.shared {
            try? FileManager.default.removeItem(at: certificates.directory)
        }
    }
}

/// What the access log says about the requests of one side of one run.
struct ConnectionCount {
    var requests: Int
    /// Distinct `$connection` numbers: each one a TCP connection and (on the TLS port) a handshake.
    var connections: Int
    /// Requests nginx logged as `HTTP/2.0`.
    var http2Requests: Int
    /// Requests with a status other than 200.
    var failures: Int

    init(_ requests: ArraySlice<Nginx.Request>) {
        self.requests = requests.count
        connections = Set(requests.map(\.connection)).count
        http2Requests = requests.filter { $0.protocolName == "HTTP/2.0" }.count
        failures = requests.filter { $0.status != 200 }.count
    }
}
