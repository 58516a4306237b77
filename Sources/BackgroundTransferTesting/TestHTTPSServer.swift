import TestPeers
import TransferPOSIX

/// An HTTPS server for a test: Debian's nginx on a free 127.0.0.1 port, TLS with HTTP/2
/// offered by ALPN, its certificate made by `openssl` at test time from a private test CA
/// (which a device trusts only after `SimulatedDevice.trustTestCertificateAuthority()`).
/// Needs `/usr/sbin/nginx` and `/usr/bin/openssl`. nginx is ended by `stop()`. Any thread.
public final class TestHTTPSServer: Sendable {
    /// The certificate the server presents, and what the default evaluation makes of it on a
    /// device that trusts the test CA.
    public enum Certificate: String, Sendable, CaseIterable {
        /// Signed by the test CA, for 127.0.0.1, valid now: accepted.
        case trusted
        /// Signed by the test CA, expired in 2020: -1201.
        case expired
        /// Signed by the test CA, valid from 2099: -1204.
        case notYetValid
        /// Signed by the test CA, for another host name: -1202.
        case wrongHost
        /// Its own issuer: -1203.
        case selfSigned
        /// Signed by a CA nobody trusts: -1202.
        case otherCA
    }

    private let nginx: Nginx
    private let site: String

    /// Starts nginx presenting `certificate`; throws, with nginx's error log, if it does not start.
    public init(certificate: Certificate = .trusted) throws {
        let certificates = try Self.certificates()
        guard let kind = TestCertificates.Kind(rawValue: certificate.rawValue) else {
            throw TestingFailure(expected: "a test certificate \(certificate)", happened: "there is none of that kind")
        }
        site = kind.rawValue
        do { nginx = try Nginx.start(sites: certificates.sites([kind])) } catch {
            throw TestingFailure(expected: "nginx to serve HTTPS on 127.0.0.1", happened: "\(error)")
        }
    }

    /// The test CA's certificate (PEM), made once per test process.
    public static var certificateAuthority: URL {
        get throws { try certificates().caFile }
    }

    private static func certificates() throws(TestingFailure) -> TestCertificates {
        do { return try TestCertificates.shared.get() } catch {
            throw TestingFailure(expected: "test certificates made by openssl", happened: "\(error)")
        }
    }

    /// `https://127.0.0.1:PORT/path`.
    public func url(for path: String) -> URL {
        // The port is a number and the path the test's own: a URL always results.
        URL(string: nginx.url(site, path)) ?? URL(fileURLWithPath: "/")
    }

    /// Serves `count` deterministic bytes at `/name`; returns them.
    @discardableResult
    public func serve(_ name: String, bytes count: Int) throws -> Data {
        try nginx.serve(name, bytes: count)
    }

    /// How many requests the server answered so far, and with which protocol (`HTTP/2.0`) and status.
    public var requests: [(method: String, path: String, protocolName: String, status: Int)] {
        nginx.requests.map { ($0.method, $0.uri, $0.protocolName, $0.status) }
    }

    /// Ends nginx (by its pid) and removes its files.
    public func stop() { nginx.stop() }
}

extension SimulatedDevice {
    /// Installs the test CA (`TestHTTPSServer.certificateAuthority`) as a root every app on
    /// this device trusts, as a profile installs one on iOS. The device's daemon takes it at
    /// once if it runs, and at every start: the device starts it with `--trusted-roots` naming
    /// the device's copy of the CA (`trustedRootsFile`), which any user may give the daemon
    /// they start. A daemon a client starts on demand never has that option, so it does not
    /// trust the CA (only an administrator's root-owned `Daemon/trusted-roots.pem` reaches it).
    public func trustTestCertificateAuthority() throws {
        let target = trustedRootsFile
        let staged = parent.appendingPathComponent("trusted-roots.pem.new")
        do {
            let ca = try Data(contentsOf: TestHTTPSServer.certificateAuthority)
            try? FileManager.default.removeItem(at: staged)
            // 0644: the daemon refuses a file its group or others may write.
            let made = FileManager.default.createFile(atPath: staged.path, contents: ca,
                                                      attributes: [.posixPermissions: 0o644])
            guard made else { throw Errno(EIO, "create", path: staged.path) }
            guard rename(staged.path, target.path) == 0 else { throw Errno.current("rename", path: staged.path) }
        } catch {
            throw TestingFailure(expected: "the test CA installed at \(target.path)", happened: "\(error)")
        }
        if FileLock.isHeld(layout.daemonLock.path) {
            _ = try ToolIdentity.request(.conditionsChanged, layout: layout, asking: "read the device's trusted roots again")
        }
    }
}
