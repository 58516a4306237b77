import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Debian's nginx (`/usr/sbin/nginx`) as a real HTTPS + HTTP/2 peer: one process (no master,
/// not a daemon) under a private prefix in a temporary directory, one TLS server per `Site`
/// on a free 127.0.0.1 port, serving `files`. The access log names each request's connection
/// (`$connection`), so a test can count connections. Started by `start`, stopped by its pid in
/// `stop()` (also on deinit). Owned by the test that made it; `stop()` may be called from any thread.
package final class Nginx: @unchecked Sendable {
    /// One TLS server: a name to find it by, and the certificate and key it presents.
    package struct Site {
        package var name: String
        package var certificate: URL
        package var key: URL
        /// Extra directives inside its `server { }` block.
        package var directives = ""
        /// False for a plain-HTTP server (`plain(name:directives:)`): no TLS, no HTTP/2.
        package var tls = true
        /// A plain server listening on this Unix-domain socket instead of a port (an upstream
        /// for the others' `proxy_pass http://unix:PATH:`).
        package var unixSocket: String?

        package init(name: String, certificate: URL, key: URL, directives: String = "") {
            self.name = name
            self.certificate = certificate
            self.key = key
            self.directives = directives
        }

        /// A plain-HTTP server, for clients that cannot be given the test CA (FoundationNetworking).
        package static func plain(name: String, directives: String = "", unixSocket: String? = nil) -> Site {
            var site = Site(name: name, certificate: URL(fileURLWithPath: "/dev/null"), key: URL(fileURLWithPath: "/dev/null"), directives: directives)
            site.tls = false
            site.unixSocket = unixSocket
            return site
        }
    }

    package static let executable = "/usr/sbin/nginx"
    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    package let directory: URL
    /// What the servers serve: put files here.
    package let files: URL
    package let accessLog: URL
    package let errorLog: URL
    private(set) var ports: [String: Int] = [:]
    /// The sites' ports, held until nginx listens on them (`PortReservation`).
    private var reservations: [PortReservation] = []
    private let process: Process
    private let exited = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false

    /// Starts nginx with `sites` and waits (up to `timeout`) until each accepts connections;
    /// on failure nginx is stopped and the error says what its error log says.
    package static func start(sites: [Site], timeout: TimeInterval = 20) throws -> Nginx {
        guard isInstalled else { throw PeerProcess.Failure(description: "\(executable) is missing: apt-get install nginx-light (.ci/run does)") }
        let nginx = try Nginx(sites: sites)
        let deadline = Date() + timeout
        // Held meanwhile, nobody else listens on these ports: one that accepts is this nginx.
        let up = PeerProcess.wait(until: deadline) { nginx.ports.values.allSatisfy(PeerProcess.accepts(port:)) || !nginx.process.isRunning }
        nginx.reservations.forEach { $0.release() }
        guard up, nginx.process.isRunning else {
            nginx.stop()
            throw PeerProcess.Failure(description: "nginx did not start (\(up ? "it exited" : "no port accepted in \(timeout) s")); error log:\n\(nginx.errorLogText)")
        }
        return nginx
    }

    private init(sites: [Site]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("bt-nginx-\(getpid())-\(UUID().uuidString.prefix(8))")
        files = directory.appendingPathComponent("files")
        accessLog = directory.appendingPathComponent("access.log")
        errorLog = directory.appendingPathComponent("error.log")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("temp"), withIntermediateDirectories: true)
        var servers = ""
        for site in sites {
            var port = 0
            if site.unixSocket == nil {
                let reservation = try PortReservation()
                reservations.append(reservation)
                port = reservation.port
                ports[site.name] = port
            }
            let listen: String
            if let socket = site.unixSocket {
                listen = "listen unix:\(socket);"
            } else if site.tls {
                listen = """
                    listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(site.certificate.path);
                    ssl_certificate_key \(site.key.path);
                    ssl_protocols TLSv1.2 TLSv1.3;
                """
            } else {
                listen = "listen 127.0.0.1:\(port);"
            }
            servers += """
                  server {
                    \(listen)
                    root \(files.path);
                    access_log \(accessLog.path) peer;
                    \(site.directives)
                  }

                """
        }
        let temp = directory.appendingPathComponent("temp").path
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(directory.path)/nginx.pid;
            error_log \(errorLog.path) info;
            events { worker_connections 1024; }
            http {
              log_format peer '$connection $connection_requests $server_port $server_protocol $status $request_method $request_uri "$http_range" $body_bytes_sent |$http_content_length|$http_transfer_encoding|$http_cookie|$http_x_parity';
              client_body_temp_path \(temp)/body;
              proxy_temp_path \(temp)/proxy;
              fastcgi_temp_path \(temp)/fastcgi;
              uwsgi_temp_path \(temp)/uwsgi;
              scgi_temp_path \(temp)/scgi;
              default_type application/octet-stream;
              keepalive_requests 10000;
              http2_max_concurrent_streams 128;
            \(servers)}

            """
        let configurationFile = directory.appendingPathComponent("nginx.conf")
        try configuration.write(to: configurationFile, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = ["-p", directory.path + "/", "-c", configurationFile.path, "-e", errorLog.path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let output = directory.appendingPathComponent("stderr.log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: output)
        process.terminationHandler = { [exited] _ in exited.signal() }
        try process.run()
    }

    deinit { stop() }

    /// Stops nginx by its pid and waits (up to 10 s) for it; removes its directory.
    package func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        lock.unlock()
        guard first else { return }
        let pid = process.processIdentifier
        // SIGKILL, not SIGTERM: the process inherits the test runner's blocked signals, and a
        // single-process nginx never unblocks them (measured: SIGTERM waited out its deadline).
        // It keeps no state a test needs.
        if process.isRunning { kill(pid, SIGKILL) }
        _ = exited.wait(timeout: .now() + 10)
        try? FileManager.default.removeItem(at: directory)
    }

    package func port(_ site: String) -> Int { ports[site] ?? 0 }

    /// https://127.0.0.1:PORT/path of a site.
    package func url(_ site: String, _ path: String) -> String {
        "https://127.0.0.1:\(port(site))/\(path.hasPrefix("/") ? String(path.dropFirst()) : path)"
    }

    /// The access log's lines as nginx wrote them (the fields after `|` are the request's
    /// `Content-Length`, `Transfer-Encoding`, `Cookie` and `X-Parity`, "-" when absent).
    package var accessLogLines: [String] {
        ((try? String(contentsOf: accessLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Writes a file to serve; returns its bytes.
    @discardableResult
    package func serve(_ name: String, bytes count: Int, seed: UInt32 = 1) throws -> Data {
        var state = seed &* 2_654_435_761 | 1
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            for index in buffer.indices {
                state = state &* 1_664_525 &+ 1_013_904_223
                buffer[index] = UInt8(truncatingIfNeeded: state >> 24)
            }
        }
        try data.write(to: files.appendingPathComponent(name))
        return data
    }

    /// One access-log line, parsed.
    package struct Request {
        package var connection: Int
        package var port: Int
        package var protocolName: String
        package var status: Int
        package var method: String
        package var uri: String
        package var range: String
    }

    /// The requests logged so far (nginx writes each line when the request ends).
    package var requests: [Request] {
        let text = (try? String(contentsOf: accessLog, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count >= 8, let connection = Int(parts[0]), let port = Int(parts[2]), let status = Int(parts[4]) else { return nil }
            return Request(connection: connection, port: port, protocolName: String(parts[3]), status: status, method: String(parts[5]), uri: String(parts[6]),
                           range: String(parts[7]).trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
        }
    }

    package var errorLogText: String { (try? String(contentsOf: errorLog, encoding: .utf8)) ?? "" }
}

extension TestCertificates {
    /// One nginx site per kind of certificate, named after it.
    package func sites(_ kinds: [Kind]) -> [Nginx.Site] {
        kinds.map { Nginx.Site(name: $0.rawValue, certificate: certificateFile($0), key: keyFile($0)) }
    }
}
