import Foundation

/// Certificates made at test time with the `openssl` command line, in a temporary directory:
/// a private CA and server certificates for 127.0.0.1 (an IP SAN) in every state a test needs.
/// Every certificate signed by a CA carries the same leaf key (`leaf.key`), on purpose: two
/// servers presenting one key is how a test sees that an accepted key covers one origin only.
/// Made once per process (`shared`) — making keys costs tens of milliseconds each — and only
/// read afterwards, so any thread may use it. The folder (mode 0700) is removed when the
/// process exits, and one left by a process that did not exit by the next process that makes
/// certificates.
package final class TestCertificates: Sendable {
    /// A server certificate's state, and the `URLError` code the default evaluation gives it
    /// when the test CA is trusted.
    package enum Kind: String, CaseIterable, Sendable {
        /// Signed by the test CA, for 127.0.0.1, valid now.
        case trusted
        /// Signed by the test CA, expired in 2020 (-1201).
        case expired
        /// Signed by the test CA, valid from 2099 (-1204).
        case notYetValid
        /// Signed by the test CA, for wrong.example (-1202).
        case wrongHost
        /// Its own issuer (-1203).
        case selfSigned
        /// Signed by another CA nobody trusts (-1202).
        case otherCA
        /// Signed by that other CA and expired in 2020: the unknown CA decides (-1202), as on
        /// Apple's systems, where -1201 is for a chain that is otherwise trusted.
        case expiredOtherCA
        /// Signed by that other CA and valid from 2099: -1202 too, for the same reason.
        case notYetValidOtherCA

        package var expectedCode: Int? {
            switch self {
            case .trusted: nil
            case .expired: -1201
            case .notYetValid: -1204
            case .wrongHost: -1202
            case .selfSigned: -1203
            case .otherCA: -1202
            case .expiredOtherCA: -1202
            case .notYetValidOtherCA: -1202
            }
        }
    }

    package let directory: URL
    /// The test CA, PEM file and DER.
    package let caFile: URL
    package let caDER: Data
    /// Each server certificate's DER, read once when made: a test that compares a chain with it
    /// reads no file then (a read that failed under a full suite's load made a match fail).
    private let ders: [Kind: Data]

    package func certificateFile(_ kind: Kind) -> URL { directory.appendingPathComponent("\(kind.rawValue).pem") }
    package func keyFile(_ kind: Kind) -> URL { directory.appendingPathComponent(kind == .selfSigned ? "self.key" : "leaf.key") }

    /// The process's certificates, made on first use.
    package static let shared: Result<TestCertificates, PeerProcess.Failure> = {
        do { return .success(try TestCertificates()) } catch let error as PeerProcess.Failure {
            return .failure(error)
        } catch {
            return .failure(PeerProcess.Failure(description: "\(error)"))
        }
    }()

    private init() throws {
        let openssl = "/usr/bin/openssl"
        Self.removeLeftovers()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bt-certs-\(getpid())-\(UUID().uuidString.prefix(8))")
        // Private keys inside: the folder is the user's alone, and goes when the process exits.
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        Self.removeAtExit(directory.path)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("db"), withIntermediateDirectories: true)
        func write(_ name: String, _ text: String) throws {
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        try write("ext.cnf", """
            [leaf]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature,keyEncipherment
            extendedKeyUsage=serverAuth
            subjectAltName=IP:127.0.0.1
            [wrong]
            basicConstraints=critical,CA:FALSE
            keyUsage=critical,digitalSignature,keyEncipherment
            extendedKeyUsage=serverAuth
            subjectAltName=DNS:wrong.example
            """)
        // `openssl ca`, because only it sets arbitrary validity dates (OpenSSL 3.0's x509 cannot).
        try write("ca.cnf", """
            [ca]
            default_ca = test
            [test]
            dir = .
            database = db/index.txt
            new_certs_dir = db
            serial = db/serial
            default_md = sha256
            policy = any
            unique_subject = no
            [any]
            commonName = supplied
            """)
        try write("db/index.txt", "")
        try write("db/serial", "1000\n")
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let caExtensions = ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
        try PeerProcess.run(openssl, ["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "3", "-subj", "/CN=BackgroundTransfer Test CA"] + caExtensions, in: directory)
        try PeerProcess.run(openssl, ["req", "-x509"] + ec + ["-keyout", "other-ca.key", "-out", "other-ca.pem", "-days", "3", "-subj", "/CN=Untrusted Test CA"] + caExtensions, in: directory)
        try PeerProcess.run(openssl, ["req", "-new"] + ec + ["-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1"], in: directory)
        func sign(_ kind: Kind, ca: String = "ca", extensions: String = "leaf", dates: [String]) throws {
            try PeerProcess.run(openssl, ["ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", "\(ca).pem", "-keyfile", "\(ca).key", "-in", "leaf.csr",
                                          "-out", "\(kind.rawValue).pem", "-extfile", "ext.cnf", "-extensions", extensions] + dates, in: directory)
        }
        let now = ["-days", "3"]
        try sign(.trusted, dates: now)
        try sign(.expired, dates: ["-startdate", "20200101000000Z", "-enddate", "20200201000000Z"])
        try sign(.notYetValid, dates: ["-startdate", "20990101000000Z", "-enddate", "20991231000000Z"])
        try sign(.wrongHost, extensions: "wrong", dates: now)
        try sign(.otherCA, ca: "other-ca", dates: now)
        try sign(.expiredOtherCA, ca: "other-ca", dates: ["-startdate", "20200101000000Z", "-enddate", "20200201000000Z"])
        let future = ["-startdate", "20990101000000Z", "-enddate", "20991231000000Z"]
        try sign(.notYetValidOtherCA, ca: "other-ca", dates: future)
        try PeerProcess.run(openssl, ["req", "-x509"] + ec + ["-keyout", "self.key", "-out", "selfSigned.pem", "-days", "3", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], in: directory)
        let caFile = directory.appendingPathComponent("ca.pem")
        // A daemon takes roots only from a file no group or other may write, whatever the umask.
        guard chmod(caFile.path, 0o644) == 0 else {
            throw PeerProcess.Failure(description: "chmod \(caFile.path): errno \(errno)")
        }
        let pem = try String(contentsOf: caFile, encoding: .utf8)
        guard let der = Self.certificates(inPEM: pem).first else { throw PeerProcess.Failure(description: "no certificate in \(caFile.path)") }
        var ders: [Kind: Data] = [:]
        for kind in Kind.allCases {
            let file = directory.appendingPathComponent("\(kind.rawValue).pem")
            guard let leaf = Self.certificates(inPEM: try String(contentsOf: file, encoding: .utf8)).first else {
                throw PeerProcess.Failure(description: "no certificate in \(file.path)")
            }
            ders[kind] = leaf
        }
        self.directory = directory
        self.caFile = caFile
        caDER = der
        self.ders = ders
    }

    /// The folder removed when this process exits (set once, before `atexit` is asked).
    nonisolated(unsafe) private static var removedAtExit: String?

    private static func removeAtExit(_ path: String) {
        removedAtExit = path
        atexit {
            if let path = TestCertificates.removedAtExit { try? FileManager.default.removeItem(atPath: path) }
        }
    }

    /// A process that did not exit (killed, crashed) left its certificates, private keys
    /// included: the first certificates of each process remove the folders
    /// (`bt-certs-<pid>-<id>`) of processes that are gone. Returns the folders removed.
    @discardableResult
    package static func removeLeftovers(in folder: URL = FileManager.default.temporaryDirectory) -> [String] {
        var removed: [String] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where name.hasPrefix("bt-certs-") {
            let parts = name.split(separator: "-")
            guard parts.count == 4, let pid = Int32(parts[2]), pid > 0, pid != getpid(),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            let path = folder.appendingPathComponent(name).path
            if (try? FileManager.default.removeItem(atPath: path)) != nil { removed.append(path) }
        }
        return removed
    }

    /// The DER certificates of a PEM file's text.
    package static func certificates(inPEM text: String) -> [Data] {
        var result: [Data] = []
        var body: String?
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("-----BEGIN CERTIFICATE") { body = "" } else if line.hasPrefix("-----END CERTIFICATE") {
                if let body, let der = Data(base64Encoded: body) { result.append(der) }
                body = nil
            } else if let current = body { body = current + line }
        }
        return result
    }

    /// The DER of a server certificate, as made.
    package func der(_ kind: Kind) -> Data? { ders[kind] }
}
