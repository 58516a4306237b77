import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP forward proxy on a free 127.0.0.1 port, for tests: `CONNECT host:port`
/// tunnels (what clients do for https URLs) and absolute-form requests (`GET http://…`,
/// for http URLs) forwarded as plain requests. It reaches 127.0.0.1 and localhost only
/// (others get 403), can demand `Proxy-Authorization: Basic` (else `407` with
/// `Proxy-Authenticate`, on a connection kept open for the retry), and logs what it did.
/// Made with `balancing:`, it is instead a plain TCP relay that sends each accepted connection
/// to the next of those 127.0.0.1 ports in turn, as a load balancer in front of backends does.
///
/// One accept thread and one thread per client connection; the log and the registry of
/// open sockets sit behind one lock, so every method may be called from any thread.
/// `stop()` (also on deinit) shuts every socket down and waits for the threads to end.
package final class ForwardProxy: @unchecked Sendable {
    /// What the proxy did with one request.
    package enum Event: Equatable, Sendable {
        /// A tunnel to "host:port" was opened.
        case tunnel(String)
        /// An absolute-form request was forwarded ("GET http://…").
        case forwarded(method: String, url: String)
        /// Answered 407: no or wrong `Proxy-Authorization` (the request line it was for).
        case refused(String)
        /// A connection was relayed, as a balancer, to this 127.0.0.1 port.
        case balanced(port: Int)
    }

    package let port: Int
    /// "127.0.0.1:PORT", as `connectionProxyDictionary` names it.
    package var hostAndPort: String { "127.0.0.1:\(port)" }
    private let listener: Int32
    private let credential: (user: String, password: String)?
    /// As a balancer, the ports connections go to in turn; empty: a forward proxy.
    private let backends: [Int]
    private var accepted = 0
    private let lock = NSCondition()
    private var log: [Event] = []
    private var sockets: Set<Int32> = []
    private var threads = 0
    private var stopping = false

    /// Starts listening. With `credential`, every request must carry it as Basic
    /// `Proxy-Authorization`.
    package init(requiring credential: (user: String, password: String)? = nil, balancing backends: [Int] = []) throws {
        self.credential = credential
        self.backends = backends
        (listener, port) = try PeerProcess.listenOnLoopback(backlog: 64, what: "proxy")
        startThread(name: "ForwardProxy accept :\(port)") { [self] in acceptLoop() }
    }

    deinit {
        stop()
    }

    /// Everything the proxy did, in order.
    package var events: [Event] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }

    /// The "host:port" targets of the tunnels opened so far.
    package var tunnels: [String] {
        events.compactMap { if case .tunnel(let target) = $0 { target } else { nil } }
    }

    /// Shuts the listener and every connection down and waits (up to 10 s) for the threads.
    /// Idempotent.
    package func stop() {
        lock.lock()
        if !stopping {
            stopping = true
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        let deadline = Date() + 10
        while threads > 0 && lock.wait(until: deadline) {}
        lock.unlock()
    }

    // MARK: Threads

    private func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
        lock.lock()
        threads += 1
        lock.unlock()
        let thread = Thread { [self] in
            body()
            lock.lock()
            threads -= 1
            lock.broadcast()
            lock.unlock()
        }
        thread.name = name
        thread.start()
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // shut down by stop(), or out of descriptors: no more clients
            }
            guard register(fd) else { return }
            startThread(name: "ForwardProxy client") { [self] in
                if backends.isEmpty { serve(fd) } else { balance(fd) }
                unregister(fd)
            }
        }
    }

    /// Records an open socket so `stop()` can wake it; false (and closed) when stopping.
    private func register(_ fd: Int32) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard !stopping else { close(fd); return false }
        sockets.insert(fd)
        return true
    }

    private func unregister(_ fd: Int32) {
        lock.lock()
        sockets.remove(fd)
        close(fd)
        lock.unlock()
    }

    private func record(_ event: Event) {
        lock.lock()
        log.append(event)
        lock.unlock()
    }

    /// As a balancer: relays `client` to the next backend in turn.
    private func balance(_ client: Int32) {
        lock.lock()
        let port = backends[accepted % backends.count]
        accepted += 1
        lock.unlock()
        guard let upstream = connectUpstream(authority: "127.0.0.1:\(port)") else { return }
        defer { unregister(upstream) }
        record(.balanced(port: port))
        relay(client, upstream, pending: [])
    }

    // MARK: One client

    /// Reads request heads until one is let through (then relays until either side closes),
    /// or the client goes away.
    private func serve(_ client: Int32) {
        var buffered: [UInt8] = []
        while let head = readHead(client, &buffered) {
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard parts.count == 3 else { return answer(client, "400 Bad Request") }
            let (method, target) = (parts[0], parts[1])
            guard authorized(lines.dropFirst()) else {
                record(.refused(lines[0]))
                answer(client, "407 Proxy Authentication Required", ["Proxy-Authenticate: Basic realm=\"proxy\""])
                continue
            }
            if method == "CONNECT" {
                guard let upstream = connectUpstream(authority: target) else { return answer(client, "403 Forbidden") }
                defer { unregister(upstream) }
                record(.tunnel(target))
                guard sendAll(client, Array("HTTP/1.1 200 Connection Established\r\n\r\n".utf8)) else { return }
                return relay(client, upstream, pending: buffered)
            }
            // Absolute form: forwarded in origin form, one request per upstream connection.
            guard let url = URLComponents(string: target), url.scheme == "http", let host = url.host else { return answer(client, "400 Bad Request") }
            guard let upstream = connectUpstream(authority: "\(host):\(url.port ?? 80)") else { return answer(client, "403 Forbidden") }
            defer { unregister(upstream) }
            record(.forwarded(method: method, url: target))
            let path = (url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath) + (url.percentEncodedQuery.map { "?" + $0 } ?? "")
            let kept = lines.dropFirst().filter { line in
                let name = line.prefix { $0 != ":" }.lowercased()
                return !line.isEmpty && name != "proxy-authorization" && name != "proxy-connection" && name != "connection"
            }
            let forwarded = (["\(method) \(path) HTTP/1.1"] + kept + ["Connection: close", "", ""]).joined(separator: "\r\n")
            guard sendAll(upstream, Array(forwarded.utf8)) else { return }
            return relay(client, upstream, pending: buffered)
        }
    }

    private func authorized(_ fields: ArraySlice<String>) -> Bool {
        guard let credential else { return true }
        let expected = "Basic " + Data("\(credential.user):\(credential.password)".utf8).base64EncodedString()
        return fields.contains { line in
            guard let colon = line.firstIndex(of: ":") else { return false }
            return line[..<colon].lowercased() == "proxy-authorization"
                && line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces) == expected
        }
    }

    /// A short answer with no body; the connection stays usable.
    private func answer(_ client: Int32, _ status: String, _ fields: [String] = []) {
        let text = (["HTTP/1.1 \(status)"] + fields + ["Content-Length: 0", "", ""]).joined(separator: "\r\n")
        _ = sendAll(client, Array(text.utf8))
    }

    /// Connects to "host:port" if it is on this machine (127.0.0.1 or localhost).
    private func connectUpstream(authority: String) -> Int32? {
        let parts = authority.split(separator: ":")
        guard parts.count == 2, ["127.0.0.1", "localhost"].contains(parts[0].lowercased()), let port = Int(parts[1]), (1...65535).contains(port) else { return nil }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = PeerProcess.loopback(port: port)
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0, register(fd) else { close(fd); return nil }
        return fd
    }

    /// Copies bytes both ways until either side closes or fails (or `stop()` shuts them down).
    private func relay(_ client: Int32, _ upstream: Int32, pending: [UInt8]) {
        if !pending.isEmpty, !sendAll(upstream, pending) { return }
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: upstream, events: Int16(POLLIN), revents: 0)]
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0 { if errno == EINTR { continue } else { return } }
            for index in 0..<2 where fds[index].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { recv(fds[index].fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { return }
                guard sendAll(fds[1 - index].fd, Array(chunk[..<n])) else { return }
            }
        }
    }

    /// The next request head (up to and without its blank line), leaving what follows it
    /// in `buffered`; nil when the client closed or sent more than 64 KiB without one.
    private func readHead(_ fd: Int32, _ buffered: inout [UInt8]) -> String? {
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        var chunk = [UInt8](repeating: 0, count: 8192)
        while buffered.firstRange(of: end) == nil {
            guard buffered.count < 64 << 10 else { return nil }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            buffered += chunk[..<n]
        }
        guard let range = buffered.firstRange(of: end) else { return nil }
        let head = String(decoding: buffered[..<range.lowerBound], as: UTF8.self)
        buffered.removeSubrange(..<range.upperBound)
        return head
    }

    private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }
}
