import Foundation

/// An upload route as the registry keeps it: its options plus the one-shot faults still armed.
struct UploadRoute {
    var options: UploadOptions
    /// `dropAfterBytes` has not fired yet (or fires every time: `dropOnce` false).
    var dropArmed: Bool
    /// `conflictOnce` has not fired yet.
    var conflictArmed: Bool

    init(options: UploadOptions) {
        self.options = options
        dropArmed = options.dropAfterBytes != nil
        conflictArmed = options.conflictOnce
    }
}

/// Where a request bound for the upload machinery goes (see `UploadRegistry.target(for:)`).
enum UploadTarget {
    /// A request to an upload route. `alsoServed`: the path serves GET/HEAD content too.
    case route(path: String, options: UploadOptions, alsoServed: Bool)
    /// A request carrying the draft's version header to a resume path; `versions` are those
    /// of the upload's route (every supported one when the upload is unknown).
    case resumePath(String, versions: Set<Int>)
}

/// Upload routes, resumable uploads (in progress and completed) and what was received.
/// Part of `ServerState`, so guarded by the server lock; changes that someone may wait for
/// (a completed upload, a connection letting go of an upload) are made with `notify`.
struct UploadRegistry {
    /// Keyed like the route table: plain path without query.
    var routes: [String: UploadRoute] = [:]
    /// Resumable uploads by resume path.
    var resumable: [String: ResumableUpload] = [:]
    /// Completed uploads per route path, in completion order.
    var received: [String: [ReceivedUpload]] = [:]
    /// Body bytes read on upload routes and resume paths, complete or not (not counting what
    /// is drained after a drop fault or an early error answer).
    var bytesReceived: Int64 = 0

    /// Installs or replaces a route's options. In-progress resumable uploads stay; the
    /// one-shot faults are armed afresh.
    mutating func setRoute(_ path: String, options: UploadOptions) {
        routes[path] = UploadRoute(options: options)
    }

    /// Whether `head` is for the upload machinery rather than `ResponsePlanner`: anything to
    /// an upload route except GET/HEAD on a path that also serves content, and requests with
    /// the version header under the resume prefix.
    func target(for head: RequestHead, alsoServed: Bool) -> UploadTarget? {
        if head.path.hasPrefix(ResumableUploadProtocol.resumePathPrefix),
           head.headers.contains(ResumableUploadProtocol.Field.version) {
            let versions = resumable[head.path].map { upload in
                routes[upload.routePath]?.options.interopVersions ?? upload.versions
            } ?? ResumableUploadProtocol.supportedVersions
            return .resumePath(head.path, versions: versions)
        }
        guard let route = routes[head.path] else { return nil }
        if alsoServed && (head.method == "GET" || head.method == "HEAD") { return nil }
        return .route(path: head.path, options: route.options, alsoServed: alsoServed)
    }

    /// Takes the drop fault for a request whose body is `bodyLength` long (nil: chunked,
    /// length unknown): the byte count to stop after, or nil when the fault does not apply.
    /// A one-shot fault is disarmed here; `rearmDrop` puts it back if it never fired.
    mutating func claimDrop(route path: String, bodyLength: Int64?) -> Int64? {
        guard var route = routes[path], route.dropArmed, let limit = route.options.dropAfterBytes else { return nil }
        if let bodyLength, bodyLength <= limit { return nil }
        if route.options.dropOnce {
            route.dropArmed = false
            routes[path] = route
        }
        return limit
    }

    mutating func rearmDrop(route path: String) {
        routes[path]?.dropArmed = true
    }

    /// Whether the conflict fault fires for this PATCH (and disarms it if so).
    mutating func claimConflict(route path: String) -> Bool {
        guard routes[path]?.conflictArmed == true else { return false }
        routes[path]?.conflictArmed = false
        return true
    }

    mutating func addReceived(_ upload: ReceivedUpload) {
        received[upload.path, default: []].append(upload)
    }
}

extension ServerCore {
    /// Lets go of a resumable upload another connection is reading a body for: shuts that
    /// connection down (as NIOResumableUpload closes the old handler) and waits until its
    /// thread has written back the offset. False if that did not happen within `timeout`.
    func takeOver(_ resumePath: String, by connectionID: Int, timeout: TimeInterval = 10) -> Bool {
        state.withLock { state in
            guard let holder = state.uploads.resumable[resumePath]?.attachedConnection,
                  holder != connectionID else { return }
            state.connections[holder]?.socket.shutdown()
        }
        return state.wait(until: Date(timeIntervalSinceNow: timeout)) { state in
            let holder = state.uploads.resumable[resumePath]?.attachedConnection
            return holder == nil || holder == connectionID
        }
    }
}
