import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX
import TransferLogging

/// What the socket's server sees of the rest of the daemon. `TransferDaemon` answers, on the loop thread.
protocol ClientServerSurroundings: AnyObject {
    /// The sessions: a connection that goes stops holding its own.
    var sessions: [SessionKey: DaemonSession] { get }
    /// The descriptors this process may hold: how many connections are served at once.
    var descriptorLimit: DescriptorLimit { get }
    /// Housekeeping at the end of this turn: a session left by its holder may need its app launched.
    func requestHousekeeping()
    /// The answer to a verified peer's request (`RequestHandler`); `afterReply` runs once the reply is queued.
    func handleRequest(_ request: DaemonRequest, from connection: ClientConnection, afterReply: inout [() -> Void]) throws -> DaemonReply
}

/// The daemon's socket: accepts clients, reads their frames within each one's share of a
/// turn, hands each request to `RequestHandler`, queues the replies, and drops peers that do
/// not say who they are or do not read. Owned by the daemon's loop thread.
final class ClientServer {
    private unowned let surroundings: any ClientServerSurroundings
    /// The listening socket a service manager passed; nil: one is bound at the container's path.
    private let passedListener: FileDescriptor?
    private let layout: ContainerLayout
    private let log: TransferLog
    private let loop: EventLoop
    private let clock: any TimeSource
    /// While commits fail, replies that tell of no change go ahead of what waits for the disk.
    private let commits: GroupCommit
    /// Transfers running at once: each holds descriptors the clients may not take.
    private let maximumConcurrentTransfers: Int
    /// How long an identified connection may hold nothing (`ConnectionShares`).
    var idleTimeout = ConnectionShares.idleTimeout
    var connections: [Int32: ClientConnection] = [:]
    private var nextConnectionID = 0
    /// What unidentified peers hold of unfinished requests, all together (see `InputAccount`).
    private let unidentifiedInput = InputAccount()
    /// What identified peers hold of unfinished requests beyond a small allowance each.
    private let identifiedInput = InputAccount.identified()
    /// A descriptor held back (/dev/null) for when none is left: closed to accept the waiting
    /// connection and tell it why it is refused, then taken again, so that the listener
    /// neither spins on EMFILE nor leaves peers hanging.
    private var spareDescriptor: FileDescriptor?
    /// Where clients' bytes are read into, one connection at a time.
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    private var listener: FileDescriptor?
    /// The socket file this daemon bound (device, inode): once it is gone or another file
    /// has its name, no client can reach this daemon again (`isReachable`).
    private var boundSocket: (device: UInt64, inode: UInt64)?

    init(surroundings: any ClientServerSurroundings, listener: FileDescriptor?, layout: ContainerLayout, log: TransferLog, loop: EventLoop,
         clock: any TimeSource, commits: GroupCommit, maximumConcurrentTransfers: Int) {
        self.surroundings = surroundings
        self.passedListener = listener
        self.layout = layout
        self.log = log
        self.loop = loop
        self.clock = clock
        self.commits = commits
        self.maximumConcurrentTransfers = maximumConcurrentTransfers
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Listens on the container's daemon socket: the one a service manager passed, else one it binds.
    func listen() throws {
        let listener = try passedListener ?? UnixSocket.listen(at: layout.daemonSocket.path)
        // Every read says which process wrote the bytes, with a pidfd of it (inherited by accepted connections).
        do { try UnixSocket.identifyWriters(listener, handles: true) } catch {
            log.error("trust", "cannot ask the kernel who writes to the socket: \(error); no hello can be verified")
        }
        self.listener = listener
        var bound = stat()
        if stat(layout.daemonSocket.path, &bound) == 0 { boundSocket = (UInt64(bound.st_dev), UInt64(bound.st_ino)) }
        spareDescriptor = try? FileDescriptor.open("/dev/null", O_RDONLY)
        watchListener()
    }

    /// False once the socket file this daemon bound was removed (its container deleted) or
    /// replaced (another daemon serves the path now): clients find the socket by its path only.
    var isReachable: Bool {
        guard let boundSocket else { return true }
        var named = stat()
        guard stat(layout.daemonSocket.path, &named) == 0 else { return errno != ENOENT && errno != ENOTDIR }
        return UInt64(named.st_dev) == boundSocket.device && UInt64(named.st_ino) == boundSocket.inode
    }

    /// Closes every connection and removes the socket if it is still this daemon's (the daemon
    /// stops), unless a service manager owns it: its socket stays, to start the next daemon on
    /// the next connection.
    func closeAll() {
        for connection in connections.values { connection.close() }
        if passedListener == nil && isReachable { unlink(layout.daemonSocket.path) }
    }

    /// Descriptors kept for the daemon's own work whatever its clients hold: the listener,
    /// the log, a journal opened for each commit, a hello's pidfd and executable, each
    /// transfer's socket and files.
    var reservedDescriptors: Int { 64 + 4 * maximumConcurrentTransfers }

    /// Connections served at once: what the limit on open files leaves beside the reserve.
    var maximumConnections: Int {
        max(8, Int(clamping: min(surroundings.descriptorLimit.soft, 1 << 30)) - reservedDescriptors)
    }

    /// Why a hello as an app of `family` is refused: it holds its share of the connections,
    /// or only the reserve for apps holding none is left (`ConnectionShares`); nil: welcome.
    func shareRefusal(forApp family: BundleIdentifier) -> String? {
        var held = 0, identified = 0
        for connection in connections.values {
            guard let hello = connection.hello else { continue }
            identified += 1
            if hello.identity.family == family { held += 1 }
        }
        let shares = ConnectionShares(maximum: maximumConnections)
        return shares.refusal(app: family.rawValue, held: held, identified: identified)
    }

    private func acceptClients() {
        while let listener {
            let accepted: FileDescriptor?
            do { accepted = try UnixSocket.accept(listener) } catch {
                if error.code == EMFILE || error.code == ENFILE, let spare = spareDescriptor {
                    // Out of descriptors: the spare makes room to take the peer and tell it so.
                    spare.close()
                    spareDescriptor = nil
                    let waiting = try? UnixSocket.accept(listener)
                    if let waiting { refuseConnection(waiting, because: "transferd has no file descriptors left (\(error))") }
                    spareDescriptor = try? FileDescriptor.open("/dev/null", O_RDONLY)
                    if waiting != nil && spareDescriptor != nil { continue }
                }
                // Stop listening for a moment instead of spinning.
                log.error("ipc", "cannot accept a connection: \(error); pausing for 100 ms (\(connections.count) clients)")
                loop.unwatch(listener)
                loop.schedule(after: 0.1) { [unowned self] in watchListener() }
                return
            }
            guard let fd = accepted else { return }
            guard connections.count < maximumConnections else {
                refuseConnection(fd, because: "transferd serves \(connections.count) connections, the most its limit of \(surroundings.descriptorLimit.soft) open files leaves room for beside its own \(reservedDescriptors)")
                continue
            }
            nextConnectionID += 1
            let connection = ClientConnection(id: nextConnectionID, descriptor: fd, account: unidentifiedInput, identifiedAccount: identifiedInput, acceptedAt: clock.now)
            if let credentials = connection.credentials, credentials.uid != getuid() {
                log.error("security", "refused connection from uid \(credentials.uid) pid \(credentials.pid): not this user")
                fd.close()
                continue
            }
            connections[fd.rawValue] = connection
            loop.watch(fd, .init(
                wantsWrite: { connection.hasReleasedOutput },
                onReadable: { [unowned self] in read(from: connection) },
                onWritable: { connection.flush() }))
        }
    }

    /// Tells a peer it is not served (a failure with reply number 0), without waiting, and closes it.
    private func refuseConnection(_ fd: FileDescriptor, because reason: String) {
        log.error("ipc", "refused a connection: \(reason)")
        if let frame = try? Frame.encode(DaemonFrame.reply(id: 0, .failure(TransferFailure(code: TransferFailure.requestRefused, message: reason)))) {
            _ = frame.withUnsafeBytes { send(fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        }
        fd.close()
    }

    private func watchListener() {
        guard let listener else { return }
        loop.watch(listener, .init(wantsWrite: { false }, onReadable: { [unowned self] in acceptClients() }, onWritable: {}))
    }

    /// Connections that have not said who they are (with a verified hello) are closed after this long.
    static let helloDeadline: TimeInterval = 10

    func closeSilentConnections(now: Date) {
        for connection in connections.values where connection.hello == nil && now.timeIntervalSince(connection.acceptedAt) > Self.helloDeadline {
            log.info("ipc", "\(connection.label) did not say who it is within \(Int(Self.helloDeadline)) s; closed")
            disconnect(connection)
        }
        let idleSince = now.addingTimeInterval(-idleTimeout)
        for connection in connections.values where connection.holdsNothing(since: idleSince) {
            let message = "\(connection.label) held no session, watch or reply for \(Int(idleTimeout)) s; "
                + "connection closed"
            let closed = LogEvent(.idleConnectionClosed, pid: connection.pid, seconds: Int(idleTimeout))
            refuse(connection, TransferFailure(code: TransferFailure.timedOut, message: message), event: closed)
        }
        let deadline = ClientConnection.frameDeadline
        for connection in connections.values {
            guard let since = connection.incompleteSince, now.timeIntervalSince(since) > deadline else { continue }
            refuse(connection, TransferFailure(code: TransferFailure.timedOut, message: "a request begun \(Int(now.timeIntervalSince(since))) s ago is still incomplete (a request must arrive within \(Int(deadline)) s); connection closed"))
        }
    }

    /// Tells the peer why it is cut off (a failure with reply number 0, sent at once) and disconnects it.
    private func refuse(_ connection: ClientConnection, _ failure: TransferFailure, event: LogEvent? = nil) {
        log.error("ipc", "\(connection.label): \(failure.message)", event: event)
        connection.send(.reply(id: 0, .failure(failure)), overtaking: true)
        connection.flush()
        disconnect(connection)
    }

    /// Handles what the peer sent, up to its share of this turn (`ClientConnection.framesPerTurn`
    /// and `bytesPerTurn`); the rest waits for the next turn.
    private func read(from connection: ClientConnection) {
        CrashGuard.idle()
        var budget = ClientConnection.bytesPerTurn
        for _ in 0..<ClientConnection.framesPerTurn {
            guard !connection.isClosed else { return }
            switch connection.nextInput(budget: &budget, scratch: readBuffer, now: clock.now) {
            case .frame(let body):
                receive(body, from: connection)
            case .idle(let more):
                if more { readAgainNextTurn(connection) }
                return
            case .closed(let reason):
                if let reason { log.error("ipc", "\(connection.label): \(reason); connection closed") }
                disconnect(connection)
                return
            case .refused(let failure):
                refuse(connection, failure)
                return
            case .foreignWriter(let what):
                log.error("trust", "\(connection.label): \(what); connection closed (a connection speaks for the one process that wrote on it first)")
                disconnect(connection)
                return
            }
        }
        readAgainNextTurn(connection)
    }

    /// Frames may wait in the connection's buffer with nothing new on the socket: look again
    /// next turn instead of waiting for the peer to write more.
    private func readAgainNextTurn(_ connection: ClientConnection) {
        guard !connection.readAgainScheduled else { return }
        connection.readAgainScheduled = true
        loop.schedule(after: 0) { [unowned self, weak connection] in
            guard let connection, !connection.isClosed else { return }
            connection.readAgainScheduled = false
            read(from: connection)
        }
    }

    private func receive(_ body: Data, from connection: ClientConnection) {
        let frame: RequestFrame
        do {
            frame = try Frame.decode(RequestFrame.self, from: body)
        } catch {
            // Answered under the request's number when that much can be read (from the JSON, or
            // from the `{"id":N` it begins with when it is not JSON), so the client can match
            // it; else the connection cannot go on (nothing could be matched), and the
            // peer is told why with number 0 and closed.
            let failure = TransferFailure(code: TransferFailure.requestRefused, message: "unreadable request: \(error)")
            let number = (try? Frame.decode(RequestNumber.self, from: body).id) ?? RequestNumber.leading(in: body)
            guard let id = number, id != 0 else {
                refuse(connection, TransferFailure(code: failure.code, message: failure.message + "; not even its number can be read, so the connection is closed"))
                return
            }
            log.error("ipc", "\(connection.label) sent an unreadable request (number \(id)): \(error)")
            answer(connection, .reply(id: id, .failure(failure)))
            return
        }
        var afterReply: [() -> Void] = []
        // The reply and what follows it (a session's backlog) are one answer (see `beginAnswer`).
        connection.beginAnswer()
        defer { connection.endAnswer() }
        let reply: DaemonReply
        do {
            reply = try surroundings.handleRequest(frame.request, from: connection, afterReply: &afterReply)
        } catch let failure as TransferFailure {
            log.error("ipc", "\(connection.label): refused: \(failure.message)", event: LogEvent(.requestFailed, pid: connection.pid, code: failure.code))
            reply = .failure(failure)
        } catch {
            log.error("ipc", "\(connection.label): request failed: \(error)")
            reply = .failure(TransferFailure(code: TransferFailure.unknown, message: "\(error)"))
        }
        // While commits fail, requests that change something are refused: a reply then tells
        // of no change, and goes ahead of the output that waits for the disk. Not a task's
        // record: the answer to a creation sent again, which may be the change that waits.
        var overtaking = commits.failure != nil
        if case .task = reply { overtaking = false }
        guard answer(connection, .reply(id: frame.id, reply), overtaking: overtaking) else { return }
        afterReply.forEach { $0() }
    }

    /// Queues a reply; a peer too far behind in reading its replies is disconnected (false).
    @discardableResult
    private func answer(_ connection: ClientConnection, _ frame: DaemonFrame, overtaking: Bool = false) -> Bool {
        guard !connection.send(frame, overtaking: overtaking) else { return true }
        if !connection.isClosed {
            log.error("ipc", "\(connection.label) is not reading its replies (\(connection.outboxBytes) bytes wait); disconnecting it")
            disconnect(connection)
        }
        return false
    }

    func disconnect(_ connection: ClientConnection) {
        loop.unwatch(connection.descriptor)
        connections.removeValue(forKey: connection.descriptor.rawValue)
        for key in connection.attachedSessions {
            if let session = surroundings.sessions[key], session.holder === connection {
                session.holder = nil
                log.info("ipc", "\(connection.label) detached", session: key.identifier.rawValue)
            }
        }
        connection.attachedSessions.removeAll()
        connection.close()
        surroundings.requestHousekeeping()
    }
}
