import Foundation
import Glibc
import TransferPOSIX

/// A small HTTP/1.1 server on 127.0.0.1 for end-to-end tests, the demo and the benchmark.
///
/// `init` binds a free port and starts serving at once: an accept thread plus one thread
/// per connection. Register what paths serve with `serve(_:file:options:)` /
/// `serve(_:data:options:)` and which take uploads with `acceptUploads(at:options:)`;
/// inspect traffic with `requests`, `bytesSent`, `receivedUploads(at:)` and
/// `uploadBytesReceived`. Require credentials with `protect(_:with:)` and
/// `requireProxyAuthentication(_:)`; see what happened in `authenticationLog`.
/// All methods may be called from any thread; shared state sits behind one lock (see
/// `ServerCore`). `stop()` (also run by `deinit`) closes everything and waits for the
/// server's threads to finish.
public final class LoopbackServer: Sendable {
    private let core: ServerCore

    /// Binds 127.0.0.1 on `port` (0, the default: a kernel-chosen one) and starts accepting
    /// connections. A given port lets a test bring a server up where clients already retry.
    public init(port: UInt16 = 0) throws {
        core = try ServerCore(port: port)
        core.start()
    }

    deinit {
        core.stop()
    }

    /// The port the server listens on, on 127.0.0.1.
    public var port: UInt16 { core.port }

    /// The listening socket's descriptor number (`LifecycleTests`).
    var listenerDescriptor: Int32 { core.listener.raw }

    /// `http://127.0.0.1:PORT`
    public var baseURL: URL { core.baseURL }

    /// The URL of `path` on this server. Paths are plain text (`/a b.bin`); they are
    /// percent-encoded here. A `?query` is passed through as is.
    public func url(for path: String) -> URL {
        core.url(for: path)
    }

    /// Serves the file at `path`, streamed from disk for each request (never loaded whole).
    /// Size, mtime and the derived validators are read when each request is answered.
    public func serve(_ path: String, file: URL, options: RouteOptions = .init()) {
        core.setRoute(.file(file, options: options), for: path)
    }

    /// Serves `data` at `path`.
    public func serve(_ path: String, data: Data, options: RouteOptions = .init()) {
        core.setRoute(.data(data, options: options), for: path)
    }

    /// Makes `path` accept uploads: `PUT` and `POST` bodies (Content-Length or chunked) are
    /// streamed into `options.storage`, never held whole in memory. Other methods get 405
    /// (GET and HEAD are still served if `serve` registered content at the same path).
    ///
    /// A completed upload is answered with `options.responseStatus` (default 201 for PUT,
    /// 200 for POST) and `{"bytes":N,"sha256":"hex"}` as `application/json` (no sha256 with
    /// `.countOnly`), and appears in `receivedUploads(at:)`. With `options.resumable` the
    /// route also speaks the resumable-upload draft: `104` with a resume URL under
    /// `/.uploads/`, offset queries (HEAD), appends (PATCH) and cancellation (DELETE) there.
    ///
    /// Calling it again replaces the options (re-arming one-shot faults) without forgetting
    /// resumable uploads in progress.
    public func acceptUploads(at path: String, options: UploadOptions = .init()) {
        core.setUploadRoute(options, for: path)
    }

    /// Completed uploads to the route at `path`, in completion order.
    public func receivedUploads(at path: String) -> [ReceivedUpload] {
        let key = ServerCore.routeKey(path)
        return core.state.withLock { $0.uploads.received[key] ?? [] }
    }

    /// Waits until at least `count` uploads to `path` have completed or `timeout` passes;
    /// returns whether they had. Blocks on the server's condition variable, no polling.
    public func waitForUploads(at path: String, count: Int, timeout: TimeInterval) -> Bool {
        let key = ServerCore.routeKey(path)
        return core.state.wait(until: Date(timeIntervalSinceNow: timeout)) { ($0.uploads.received[key]?.count ?? 0) >= count }
    }

    /// Body bytes read on upload routes and resume paths so far, including uploads cut off
    /// part-way and every PATCH append: how much the clients have (re)sent. Bytes a drop
    /// fault or an early error answer discards are not included.
    public var uploadBytesReceived: Int64 {
        core.state.withLock { $0.uploads.bytesReceived }
    }

    /// Stops serving `path` and accepting uploads there (it answers 404 afterwards).
    /// Resumable uploads already started there can still be resumed.
    public func remove(_ path: String) {
        core.removeRoute(for: path)
    }

    /// Closes the listener and every connection and waits for the server's threads to
    /// end. Idempotent.
    public func stop() {
        core.stop()
    }

    // MARK: Authentication

    /// Requires credentials for `pathPrefix` and every path below it (whole segments: `/a`
    /// covers `/a` and `/a/b`, not `/ab`; `/` covers everything), served content and upload
    /// routes alike, and the resume paths of resumable uploads created there. Where prefixes
    /// nest, the longest applies. A request without valid credentials is answered `401` with
    /// a `WWW-Authenticate` challenge and a short text body and never reaches the route: its
    /// body is drained (up to 1 MiB of known length, with no `Expect: 100-continue` pending)
    /// or the connection is closed after the answer, and nothing is stored or counted as
    /// uploaded. Calling it again for the same prefix replaces the protection.
    public func protect(_ pathPrefix: String, with protection: Protection) {
        core.state.withLock { $0.auth.protections[ServerCore.routeKey(pathPrefix)] = protection }
    }

    /// Removes the protection `protect(_:with:)` set for exactly this prefix.
    public func unprotect(_ pathPrefix: String) {
        core.state.withLock { $0.auth.protections[ServerCore.routeKey(pathPrefix)] = nil }
    }

    /// Proxy mode. With a protection, requests in absolute form (`GET http://127.0.0.1:PORT/p`,
    /// as a client sends to its HTTP proxy) must carry valid `Proxy-Authorization`, else they
    /// get `407` with `Proxy-Authenticate`; accepted ones naming this server (`127.0.0.1` or
    /// `localhost` with this port) are served as if in origin form (path protection still
    /// applies), others get `502`. Nil turns proxy mode off: absolute-form requests are then
    /// served by their path whatever authority they name. Origin-form requests never need
    /// proxy credentials.
    public func requireProxyAuthentication(_ protection: Protection?) {
        core.state.withLock { $0.auth.proxy = protection }
    }

    /// Every authentication decision (requests to protected paths, proxied requests in proxy
    /// mode), in order.
    public var authenticationLog: [AuthenticationEvent] {
        core.state.withLock { $0.auth.events }
    }

    /// The authentication decisions for requests to `path` (plain path, no query), added up:
    /// origin (401) decisions by default, proxy (407) ones with `proxy`.
    public func authenticationCounts(at path: String, proxy: Bool = false) -> AuthenticationCounts {
        let key = ServerCore.routeKey(path)
        return AuthenticationCounts(authenticationLog.lazy.filter { $0.path == key && $0.proxy == proxy })
    }

    /// Every distinct `Authorization` and `Proxy-Authorization` value received, on any path,
    /// in the order first seen: what must never show up in a client's logs.
    public var credentialsSeen: [String] {
        let names = ["Authorization", "Proxy-Authorization"]
        var seen: [String] = []
        for request in requests {
            for field in request.headers where names.contains(where: { HTTPHeaders.namesMatch(field.name, $0) }) {
                if !seen.contains(field.value) { seen.append(field.value) }
            }
        }
        return seen
    }

    /// Every request seen, in arrival order.
    public var requests: [RecordedRequest] {
        core.state.withLock { $0.log.requests }
    }

    /// Response body bytes written so far, over all connections (heads and chunk framing
    /// not included). Bytes count as soon as they are handed to the kernel, so once a
    /// client has read them they are included.
    public var bytesSent: Int64 {
        core.state.withLock { $0.log.bodyBytesSent }
    }

    /// Waits until at least `count` requests have been recorded or `timeout` passes;
    /// returns whether they were. Blocks on a condition variable, no polling.
    public func waitForRequests(count: Int, timeout: TimeInterval) -> Bool {
        core.state.wait(until: Date(timeIntervalSinceNow: timeout)) { $0.log.requests.count >= count }
    }
}

/// The server's engine: the listening socket, the shared state and the threads' entry
/// points. Shared by the façade, the accept thread and every connection thread (which
/// keep it alive until they end). Its only mutable state is `state`, behind one lock.
final class ServerCore: Sendable {
    let listener: SocketFD
    let port: UInt16
    let baseURL: URL
    let state = Locked(ServerState())
    /// Digest nonces and opaque value; immutable, so used without the lock.
    let nonces = NonceSource()

    init(port: UInt16) throws {
        Self.ignoreSIGPIPE
        (listener, self.port) = try SocketFD.listenOnLoopback(port: port)
        baseURL = URL(string: "http://127.0.0.1:\(self.port)")!
    }

    /// sendfile(2) has no MSG_NOSIGNAL: writing to a connection the client has closed would
    /// otherwise kill the process with SIGPIPE. Done once per process.
    private static let ignoreSIGPIPE: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    // MARK: Lifecycle

    func start() {
        state.withLock { $0.acceptLoopRunning = true }
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "LoopbackServer accept :\(port)"
        thread.start()
    }

    /// Accepts connections until `stop()` shuts the listener down, giving each its own thread.
    private func acceptLoop() {
        defer { state.withLock(notify: true) { $0.acceptLoopRunning = false } }
        while true {
            switch listener.accept() {
            case .connection(let socket):
                let id: Int? = state.withLock { state in
                    guard !state.stopping else { return nil }
                    let id = state.nextConnectionID
                    state.nextConnectionID += 1
                    state.connections[id] = ConnectionRecord(socket: socket)
                    return id
                }
                guard let id else {
                    socket.close()
                    return
                }
                let thread = Thread { [self] in
                    state.withLock { $0.connections[id]?.thread = pthread_self() }
                    Connection(id: id, socket: socket, core: self).run()
                    connectionEnded(id)
                }
                thread.name = "LoopbackServer connection \(id)"
                thread.start()
            case .retry:
                continue
            case .failed(let code):
                if isStopping { return }
                // Out of descriptors or memory: back off briefly (waking early on stop), retry.
                guard [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(code) else { return }
                _ = pause(until: Date(timeIntervalSinceNow: 0.05))
            }
        }
    }

    /// Called on a connection's thread as it ends. Closing under the lock means `stop()`
    /// never shuts down a descriptor number that has been reused.
    private func connectionEnded(_ id: Int) {
        state.withLock(notify: true) { state in
            state.connections.removeValue(forKey: id)?.socket.close()
        }
    }

    /// Shuts the listener and every connection down, waits for the accept thread and all
    /// connection threads to finish, then closes the listener. Later calls wait for the
    /// first to finish.
    func stop() {
        let me = pthread_self()
        let first = state.withLock(notify: true) { state -> Bool in
            guard !state.stopping else { return false }
            state.stopping = true
            listener.shutdown()  // wakes accept()
            for connection in state.connections.values {
                connection.socket.shutdown()  // wakes recv/send/sendfile
            }
            return true
        }
        // A connection thread calling stop() must not wait for itself.
        let othersEnded: (ServerState) -> Bool = { state in
            !state.acceptLoopRunning && state.connections.values.allSatisfy { $0.thread.map { pthread_equal($0, me) != 0 } ?? false }
        }
        if first {
            // shutdown() wakes an accept() blocked on the listener. In one whole-suite run it
            // did not: the accept thread stayed in accept() and stop() waited for ever (a test
            // hit its time limit). A connection to the port wakes it whatever the cause.
            if !state.wait(until: Date(timeIntervalSinceNow: 1), for: { !$0.acceptLoopRunning }) { SocketFD.knock(port: port) }
            _ = state.wait(until: nil, for: othersEnded)
            state.withLock(notify: true) { state in
                listener.close()
                state.stopped = true
            }
        } else {
            _ = state.wait(until: nil) { $0.stopped || othersEnded($0) }
        }
    }

    var isStopping: Bool {
        state.withLock { $0.stopping }
    }

    /// Waits until `deadline` (used to throttle bodies). Returns false early if the
    /// server is stopping.
    func pause(until deadline: Date) -> Bool {
        !state.wait(until: deadline) { $0.stopping }
    }

    // MARK: Routes and records

    func url(for path: String) -> URL {
        let full = path.hasPrefix("/") ? path : "/" + path
        let pathPart = full.prefix { $0 != "?" }
        let query = full.firstIndex(of: "?").map { full[$0...] } ?? ""
        let encoded = pathPart.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? String(pathPart)
        return URL(string: baseURL.absoluteString + encoded + query)!
    }

    /// Routes are keyed by the plain path without any query.
    static func routeKey(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : "/" + path
        return String(full.prefix { $0 != "?" })
    }

    func setRoute(_ route: Route, for path: String) {
        state.withLock { $0.routes[Self.routeKey(path)] = route }
    }

    func removeRoute(for path: String) {
        state.withLock { state in
            state.routes[Self.routeKey(path)] = nil
            state.uploads.routes[Self.routeKey(path)] = nil
        }
    }

    func setUploadRoute(_ options: UploadOptions, for path: String) {
        state.withLock { $0.uploads.setRoute(Self.routeKey(path), options: options) }
    }

    /// Where `head` goes if the upload machinery handles it; nil for `ResponsePlanner`.
    func uploadTarget(for head: RequestHead) -> UploadTarget? {
        state.withLock { $0.uploads.target(for: head, alsoServed: $0.routes[head.path] != nil) }
    }

    func route(for requestPath: String) -> Route? {
        state.withLock { $0.routes[requestPath] }
    }

    func record(_ request: RecordedRequest) {
        state.withLock(notify: true) { $0.log.append(request) }
    }

    func countUploadBytes(_ count: Int) {
        state.withLock { $0.uploads.bytesReceived += Int64(count) }
    }

    func countBodyBytes(_ count: Int) {
        state.withLock { $0.log.bodyBytesSent += Int64(count) }
    }
}
