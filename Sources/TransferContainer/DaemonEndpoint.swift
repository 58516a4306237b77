#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferPOSIX

/// How a process reaches the container's daemon: connect to its socket, and if nobody
/// answers, start `transferd` (as launchd would) and wait for it. Stateless.
public enum DaemonEndpoint {
    /// Where the daemon executable is looked for, in order:
    /// 1. `BGTRANSFER_TRANSFERD`, when set: the only place looked (explicit beats implicit),
    ///    and refused unless `DaemonExecutableCheck` allows it;
    /// 2. `transferd` beside the calling executable (SwiftPM builds a package's executables,
    ///    and those of its dependencies, into one folder);
    /// 3. `transferd` in each directory of `PATH`: the first executable one found, refused
    ///    (an error, not a reason to look further) unless `DaemonExecutableCheck` allows it.
    /// Throws `cannotConnectToHost` naming every place looked when none holds an executable file.
    public static func daemonExecutable(environment: [String: String] = ProcessInfo.processInfo.environment, caller: String = ProcessSpawner.currentExecutable) throws(TransferFailure) -> String {
        if let explicit = environment["BGTRANSFER_TRANSFERD"], !explicit.isEmpty {
            if let refusal = DaemonExecutableCheck.refusal(of: explicit) {
                throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: "cannot start the transfer daemon: BGTRANSFER_TRANSFERD names \(explicit), which is refused: \(refusal)", subject: explicit)
            }
            return explicit
        }
        let beside = ((caller as NSString).deletingLastPathComponent as NSString).appendingPathComponent("transferd")
        var looked = [beside]
        if isExecutableFile(beside) { return beside }
        for directory in (environment["PATH"] ?? "").split(separator: ":") where !directory.isEmpty {
            let candidate = (String(directory) as NSString).appendingPathComponent("transferd")
            guard isExecutableFile(candidate) else { looked.append(candidate); continue }
            // The first one found is the one a shell would run; one that anybody else could
            // have planted or changed is refused, not skipped for the next.
            if let refusal = DaemonExecutableCheck.refusal(of: candidate) {
                throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: """
                    cannot start the transfer daemon: \(candidate), found through PATH, is refused: \(refusal)
                    """, subject: candidate)
            }
            return candidate
        }
        throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: "cannot find the transfer daemon transferd (looked at \(looked.joined(separator: ", ")); build it with the app (depend on the BackgroundTransfer package's transferd product) or set BGTRANSFER_TRANSFERD", subject: beside)
    }

    private static func isExecutableFile(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue && access(path, X_OK) == 0
    }

    /// The whole environment of a daemon started on demand: nothing the client set reaches
    /// the daemon that serves every app (nor the apps it relaunches), only a fixed `PATH`, the
    /// user's home from the password database, and the client's locale and time zone.
    public static func daemonEnvironment(client: [String: String]) -> [String: String] {
        var environment = ["PATH": "/usr/local/bin:/usr/bin:/bin"]
        if let home = homeDirectory() { environment["HOME"] = home }
        for name in ["LANG", "LC_ALL", "TZ"] {
            if let value = client[name], !value.isEmpty { environment[name] = value }
        }
        return environment
    }

    private static func homeDirectory() -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(getuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil, let directory = entry.pw_dir else { return nil }
        return String(cString: directory)
    }

    /// Connects to the daemon, starting it on demand (found as `environment` says, see
    /// `daemonExecutable`, and started with `daemonEnvironment`); an on-demand daemon exits
    /// after 30 idle seconds. `started` hears of a daemon started here (its executable and
    /// pid), for the caller's log: this module has none.
    public static func connect(_ layout: ContainerLayout, started: ((_ daemon: String, _ pid: Int32) -> Void)? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) throws(TransferFailure) -> FileDescriptor {
        let path = layout.daemonSocket.path
        if let fd = try? UnixSocket.connect(to: path) { return fd }
        // A container that is gone (deleted under us) gets no daemon: starting one would
        // only recreate it somewhere nobody looks.
        guard FileManager.default.fileExists(atPath: layout.daemonDirectory.path) else {
            throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: "the container \(layout.root.path) does not exist", subject: layout.root.path)
        }
        let daemon = try daemonExecutable(environment: environment)
        do {
            let pid = try ProcessSpawner.spawn(daemon, arguments: ["--container", layout.root.path, "--exit-when-idle", "30"], environment: daemonEnvironment(client: environment), newSession: true, outputPath: layout.logsDirectory.appendingPathComponent("transferd.out").path)
            started?(daemon, pid)
        } catch {
            throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: "cannot start the transfer daemon \(daemon): \(error)", subject: daemon)
        }
        // The daemon binds its socket within milliseconds; wait for it with a deadline.
        let deadline = Date().addingTimeInterval(10)
        var lastError: Errno?
        while Date() < deadline {
            do { return try UnixSocket.connect(to: path) } catch { lastError = error }
            usleep(10_000)
        }
        throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: "the transfer daemon \(daemon) did not answer at \(path): \(lastError.map { "\($0)" } ?? "timeout")", subject: path)
    }

    /// Makes sure a daemon serves the container when it holds `UnfinishedWork`, as
    /// nsurlsessiond is always there on iOS: a daemon that crashed comes back with the next
    /// process of any app, not only with the next one that opens a session. Starts it the one
    /// way `connect` does, and waits for it to answer a ping. Returns the work found; nil when
    /// a daemon already listens (one connect, the path every start takes while one runs) or
    /// there is no work (then nothing is started).
    public static func serveUnfinishedWork(
        _ layout: ContainerLayout, started: ((_ daemon: String, _ pid: Int32) -> Void)? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(TransferFailure) -> UnfinishedWork? {
        if let listening = try? UnixSocket.connect(to: layout.daemonSocket.path) {
            listening.close()
            return nil
        }
        guard let work = UnfinishedWork.first(in: layout) else { return nil }
        let fd = try connect(layout, started: started, environment: environment)
        defer { fd.close() }
        try send(.ping, id: 1, on: fd)
        var answered = false
        try readFrames(fd, timeout: 10) { frame throws(TransferFailure) in
            guard case .reply(1, _) = frame else { return true }
            answered = true
            return false
        }
        guard answered else {
            let socket = layout.daemonSocket.path
            let message = "the transfer daemon at \(socket) closed the connection without answering a ping"
            throw TransferFailure(code: TransferFailure.networkConnectionLost, message: message, subject: socket)
        }
        return work
    }

    /// One request, one reply, on a connection of its own (for tools; apps use the client
    /// library), after `hello` if given: the daemon answers a ping from anyone, everything
    /// else only after a hello it has verified.
    public static func request(_ request: DaemonRequest, as hello: ClientHello? = nil, layout: ContainerLayout, timeout: TimeInterval = 30) throws(TransferFailure) -> DaemonReply {
        let fd = try connect(layout)
        defer { fd.close() }
        let id = try sayHello(hello, on: fd, timeout: timeout)
        try send(request, id: id, on: fd)
        var answer: DaemonReply?
        try readFrames(fd, timeout: timeout) { frame throws(TransferFailure) in
            guard case .reply(id, let reply) = frame else { return true }
            if case .failure(let failure) = reply { throw failure }
            answer = reply
            return false
        }
        guard let answer else { throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "the transfer daemon closed the connection without answering") }
        return answer
    }

    /// One request to a daemon that is already running (none is started), then every frame
    /// that follows, handed to `receive` until it returns false or the daemon closes the
    /// connection (for `bgtransfer watch`). Throws `cannotConnectToHost` when no daemon
    /// answers, and the daemon's failure if it refuses the request.
    public static func stream(_ request: DaemonRequest, as hello: ClientHello? = nil, layout: ContainerLayout, receive: (DaemonFrame) -> Bool) throws(TransferFailure) {
        let fd: FileDescriptor
        do { fd = try UnixSocket.connect(to: layout.daemonSocket.path) } catch {
            throw TransferFailure(code: TransferFailure.cannotConnectToHost, message: "the transfer daemon is not running (\(error))", subject: layout.daemonSocket.path)
        }
        defer { fd.close() }
        let id = try sayHello(hello, on: fd, timeout: 30)
        try send(request, id: id, on: fd)
        try readFrames(fd, timeout: nil) { frame throws(TransferFailure) in
            if case .reply(id, .failure(let failure)) = frame { throw failure }
            return receive(frame)
        }
    }

    /// Sends the hello (request 1) and waits for the welcome, as the daemon wants: it reads
    /// nothing past a hello before answering it. Returns the next request's number.
    private static func sayHello(_ hello: ClientHello?, on fd: FileDescriptor, timeout: TimeInterval) throws(TransferFailure) -> UInt64 {
        guard let hello else { return 1 }
        try send(.hello(hello), id: 1, on: fd)
        var welcomed = false
        try readFrames(fd, timeout: timeout) { frame throws(TransferFailure) in
            guard case .reply(1, let reply) = frame else { return true }
            if case .failure(let failure) = reply { throw failure }
            welcomed = true
            return false
        }
        guard welcomed else { throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "the transfer daemon closed the connection without answering the hello") }
        setReceiveTimeout(fd, nil)
        return 2
    }

    private static func setReceiveTimeout(_ fd: FileDescriptor, _ timeout: TimeInterval?) {
        var timeval = timeval(tv_sec: Int(timeout ?? 0), tv_usec: 0)
        setsockopt(fd.rawValue, SOL_SOCKET, SO_RCVTIMEO, &timeval, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func send(_ request: DaemonRequest, id: UInt64, on fd: FileDescriptor) throws(TransferFailure) {
        do {
            try UnixSocket.sendAll(fd, try Frame.encode(RequestFrame(id: id, request: request)))
        } catch {
            throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "cannot send to the transfer daemon: \(error)")
        }
    }

    /// Reads frames until `receive` returns false (returns) or the connection ends: a close
    /// while streaming (no `timeout`) returns; silence past `timeout` or an unreadable frame throws.
    private static func readFrames(_ fd: FileDescriptor, timeout: TimeInterval?, _ receive: (DaemonFrame) throws(TransferFailure) -> Bool) throws(TransferFailure) {
        if let timeout { setReceiveTimeout(fd, timeout) }
        var decoder = FrameDecoder(limit: Frame.maximumReplySize)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                guard let timeout else { return }
                throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "the transfer daemon closed the connection or did not answer within \(Int(timeout)) s")
            }
            buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            do {
                while let body = try decoder.next() {
                    guard try receive(try Frame.decode(DaemonFrame.self, from: body)) else { return }
                }
            } catch let failure as TransferFailure {
                throw failure
            } catch {
                throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "unreadable answer from the daemon: \(error)")
            }
        }
    }
}
