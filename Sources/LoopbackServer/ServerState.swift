import Glibc

/// Everything the API callers, the accept thread and the connection threads share.
/// Lives inside `ServerCore.state`, so every access holds the server's one lock.
struct ServerState {
    /// Route table (content to serve), keyed by plain (percent-decoded, query-less) path.
    var routes: [String: Route] = [:]
    var log = RequestLog()
    /// Upload routes, resumable uploads and what was received.
    var uploads = UploadRegistry()
    /// Protected prefixes, proxy authentication and the authentication log.
    var auth = AuthenticationRegistry()
    /// Live connections by ID. An entry is added by the accept thread before the
    /// connection's thread starts and removed (with the socket closed) as it ends.
    var connections: [Int: ConnectionRecord] = [:]
    var nextConnectionID = 1
    var acceptLoopRunning = false
    /// Set by the first `stop()`; no new connections or requests are taken after it.
    var stopping = false
    /// Set once `stop()` has finished tearing everything down.
    var stopped = false
}

/// A live connection as the registry sees it: its socket (so `stop()` and
/// `ServerCore.takeOver` can shut it down)
/// and, once running, its thread (so `stop()` called from that thread does not wait for itself).
struct ConnectionRecord {
    let socket: SocketFD
    var thread: pthread_t?
}
