#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferContainer
import TransferTransport
import TransferLogging
import TransferPOSIX

/// This process's connection to `transferd`: one per process and container, shared by all
/// sessions. Requests wait for their reply; pushes (events, progress) are routed to the
/// session they name. If no daemon answers, it starts one (as launchd would); if the daemon
/// dies, it reconnects and reopens every session, which replays undelivered events.
///
/// Thread-safe: the socket's writes and all state are behind one lock; a reader thread owns reads.
final class DaemonConnection: @unchecked Sendable {
    /// What a session registers to hear from the daemon.
    struct Subscriber: Sendable {
        var onPush: @Sendable (DaemonPush) -> Void
        /// Called after a reconnect, to open the session again in the new daemon.
        var onReconnect: @Sendable () -> Void
    }

    private struct State {
        var descriptor: FileDescriptor?
        var nextRequestID: UInt64 = 1
        var waiters: [UInt64: Waiter] = [:]
        var subscribers: [SessionIdentifier: Subscriber] = [:]
        /// Bumped by every connect; a reader whose connection is not the current one is ignored.
        var generation = 0
        /// One reconnect loop at a time.
        var reconnecting = false
        /// Why the daemon is closing the connection (a failure with reply number 0, which
        /// answers no request): what the requests still waiting fail with when it closes.
        var refusal: TransferFailure?
    }

    /// Who waits for a request's reply: a blocked caller, or a callback (`send`, `request(_:onReply:)`).
    private final class Waiter: @unchecked Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        /// Set before `semaphore` is signalled, for a blocked caller.
        var result: Result<DaemonReply, TransferFailure>?
        let onReply: (@Sendable (Result<DaemonReply, TransferFailure>) -> Void)?
        /// Answered once only: a lost connection, a timeout and a failed send may race.
        private let answered = Locked(false)
        init(onReply: (@Sendable (Result<DaemonReply, TransferFailure>) -> Void)? = nil) { self.onReply = onReply }

        /// The reply, or nil when the connection was lost first: a `.failure` reply and a
        /// lost connection are failures.
        func answer(_ reply: DaemonReply?) {
            guard answered.withLock({ answered in defer { answered = true }; return !answered }) else { return }
            let result: Result<DaemonReply, TransferFailure> = switch reply {
            case .failure(let failure): .failure(failure)
            case .some(let reply): .success(reply)
            case .none: .failure(TransferFailure(code: TransferFailure.networkConnectionLost, message: "the transfer daemon went away before answering"))
            }
            guard let onReply else {
                self.result = result
                semaphore.signal()
                return
            }
            onReply(result)
        }
    }

    private static let connections = Locked<[URL: DaemonConnection]>([:])

    let layout: ContainerLayout
    private let state = Locked(State())
    private let writeLock = NSLock()
    private let log: TransferLog
    /// How long a request waits for its reply before failing.
    static let requestTimeout: TimeInterval = 30

    /// How long `request` waits for its reply: longer for those answered with a page of task
    /// records, which a busy daemon holding 120,000 tasks took more than 30 s to answer.
    static func timeout(for request: DaemonRequest) -> TimeInterval {
        switch request {
        case .openSession, .getTasks: return 4 * requestTimeout
        default: return requestTimeout
        }
    }

    /// The failure of a request the daemon did not answer within `timeout`.
    private static func unanswered(within timeout: TimeInterval) -> TransferFailure {
        TransferFailure(code: TransferFailure.timedOut,
                        message: "the transfer daemon did not answer within \(Int(timeout)) s")
    }

    private init(layout: ContainerLayout, log: TransferLog) {
        self.layout = layout
        self.log = log
    }

    /// The process's connection for the current environment's container, connecting (and
    /// starting the daemon) on first use.
    static func shared() throws(TransferFailure) -> DaemonConnection {
        let environment = AppEnvironment.current
        let connection = connections.withLock { all in
            if let existing = all[environment.layout.root] { return existing }
            let created = DaemonConnection(layout: environment.layout, log: environment.log)
            all[environment.layout.root] = created
            return created
        }
        try connection.connectIfNeeded()
        return connection
    }

    /// Makes sure a daemon serves this process's container when it holds unfinished work
    /// (`DaemonEndpoint.serveUnfinishedWork`), for a process that may open no session: run by
    /// `BackgroundApplication` as it starts. A daemon that cannot be started is logged, not
    /// thrown: the app runs on, and its sessions report it when they open.
    static func serveUnfinishedWork() {
        let environment = AppEnvironment.current
        let log = environment.log
        do {
            let started: (String, Int32) -> Void = { daemon, pid in
                log.notice("connection", "no daemon answered; started \(daemon) (pid \(pid))")
            }
            let work = try DaemonEndpoint.serveUnfinishedWork(environment.layout, started: started,
                                                              environment: environment.environment)
            if let work {
                log.info("connection", "the container holds unfinished work (\(work)); a daemon serves it",
                         session: work.session)
            }
        } catch {
            log.error("connection", "the container holds unfinished work, but no transfer daemon serves it: \(error)")
        }
    }

    // MARK: Connecting

    private func connectIfNeeded() throws(TransferFailure) {
        if state.withLock({ $0.descriptor != nil }) { return }
        try connect()
    }

    private func connect() throws(TransferFailure) {
        let fd = try DaemonEndpoint.connect(layout, started: { [log] daemon, pid in
            log.notice("connection", "no daemon answered; started \(daemon) (pid \(pid))")
        }, environment: AppEnvironment.current.environment)
        // Nothing else is written until the hello is answered: the daemon reads nothing past a
        // hello before answering it (what follows may have been written by another executable).
        writeLock.lock()
        defer { writeLock.unlock() }
        let generation = state.withLock { state -> Int in
            state.descriptor = fd
            state.generation += 1
            return state.generation
        }
        let reader = Thread { [self] in readLoop(fd, generation: generation) }
        reader.name = "BackgroundTransfer.DaemonConnection"
        reader.start()
        let environment = AppEnvironment.current
        let hello = ClientHello(identity: environment.identity, executablePath: ProcessSpawner.currentExecutable, processName: environment.log.process, isForeground: environment.isForeground,
                                readsCompactSummaries: true)
        do {
            _ = try request(.hello(hello), writeLocked: true)
        } catch {
            // A daemon dying as we connected: retire this connection, so that its reader's
            // end does not start a second reconnect.
            state.withLock { state in
                if state.generation == generation {
                    state.descriptor = nil
                    state.generation += 1
                }
            }
            shutdown(fd.rawValue, Int32(SHUT_RDWR))
            throw error
        }
    }

    // MARK: Requests

    /// Sends a request and waits for its reply; a `.failure` reply is thrown.
    @discardableResult
    func request(_ request: DaemonRequest) throws(TransferFailure) -> DaemonReply {
        try self.request(request, writeLocked: false)
    }

    private func request(_ request: DaemonRequest, writeLocked: Bool) throws(TransferFailure) -> DaemonReply {
        let waiter = Waiter()
        let id = try send(request, waiter, writeLocked: writeLocked)
        let timeout = Self.timeout(for: request)
        if waiter.semaphore.wait(timeout: .now() + timeout) == .timedOut {
            _ = state.withLock { $0.waiters.removeValue(forKey: id) }
            throw Self.unanswered(within: timeout)
        }
        return try waiter.result!.get() // set before the signal
    }

    /// Sends a request without waiting: `onReply` runs once, on the reader thread or a
    /// timer's (keep it short), with the reply, a failure, or `timedOut` after
    /// `requestTimeout`. No thread waits meanwhile: the async API, whose callers run on Swift's
    /// cooperative pool (as many threads as cores), is built on it.
    func request(_ request: DaemonRequest, onReply: @escaping @Sendable (Result<DaemonReply, TransferFailure>) -> Void) {
        let waiter = Waiter(onReply: onReply)
        do {
            let id = try send(request, waiter)
            let timeout = Self.timeout(for: request)
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                guard let unanswered = self?.state.withLock({ $0.waiters.removeValue(forKey: id) }) else { return }
                unanswered.answer(.failure(Self.unanswered(within: timeout)))
            }
        } catch {
            waiter.answer(.failure(error))
        }
    }

    /// Sends a request without waiting: `onReply` runs on the connection's reader thread
    /// (keep it short; it must not wait for another reply) with the reply, or with a failure
    /// if the connection is lost first. Requests reach the daemon, and replies come back, in
    /// the order they were sent.
    func send(_ request: DaemonRequest, onReply: @escaping @Sendable (Result<DaemonReply, TransferFailure>) -> Void) {
        do {
            _ = try send(request, Waiter(onReply: onReply))
        } catch {
            onReply(.failure(error))
        }
    }

    private func send(_ request: DaemonRequest, _ waiter: Waiter, writeLocked: Bool = false) throws(TransferFailure) -> UInt64 {
        // The lock is held from numbering to writing, so that frames go out in number order.
        if !writeLocked { writeLock.lock() }
        defer { if !writeLocked { writeLock.unlock() } }
        let (id, fd) = state.withLock { state -> (UInt64, FileDescriptor?) in
            let id = state.nextRequestID
            state.nextRequestID += 1
            state.waiters[id] = waiter
            return (id, state.descriptor)
        }
        guard let fd else {
            _ = state.withLock { $0.waiters.removeValue(forKey: id) }
            throw TransferFailure(code: TransferFailure.networkConnectionLost, message: "not connected to the transfer daemon")
        }
        let frame: Data
        do {
            frame = try Frame.encode(RequestFrame(id: id, request: request))
        } catch {
            // Not the connection's fault, and no retry will help: the request fails for good.
            _ = state.withLock { $0.waiters.removeValue(forKey: id) }
            throw TransferFailure(code: TransferFailure.requestRefused, message: "the request cannot be sent to the transfer daemon: \(error)")
        }
        do {
            try UnixSocket.sendAll(fd, frame)
        } catch {
            // The connection is broken. Its reader answers every waiter when it reaches the
            // end, with the daemon's refusal if it sent one before closing (`refusal`): the
            // daemon's reason, not this write's error. A peer still there is cut off so that
            // the reader does reach the end.
            if error.code != EPIPE && error.code != ECONNRESET { shutdown(fd.rawValue, Int32(SHUT_RDWR)) }
            log.error("connection", "cannot send to the transfer daemon: \(error)")
        }
        return id
    }

    func subscribe(_ identifier: SessionIdentifier, _ subscriber: Subscriber) {
        state.withLock { $0.subscribers[identifier] = subscriber }
    }

    func unsubscribe(_ identifier: SessionIdentifier) {
        _ = state.withLock { $0.subscribers.removeValue(forKey: identifier) }
    }

    // MARK: Reading

    private func readLoop(_ fd: FileDescriptor, generation: Int) {
        var decoder = FrameDecoder(limit: Frame.maximumReplySize)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        readLoop: while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            do {
                while let body = try decoder.next() {
                    dispatch(try Frame.decode(DaemonFrame.self, from: body))
                }
            } catch {
                log.error("connection", "unreadable frame from the daemon: \(error)")
                break readLoop
            }
        }
        connectionLost(fd, generation: generation)
    }

    private func dispatch(_ frame: DaemonFrame) {
        switch frame {
        case .reply(0, .failure(let failure)):
            log.error("connection", "the transfer daemon refused this connection: \(failure.message)")
            state.withLock { $0.refusal = failure }
        case .reply(let id, let reply):
            state.withLock { $0.waiters.removeValue(forKey: id) }?.answer(reply)
        case .push(let push):
            guard let identifier = push.session else { return } // only for watchers; the library never asks to watch
            let subscriber = state.withLock { $0.subscribers[identifier] }
            subscriber?.onPush(push)
        }
    }

    /// The daemon went away (killed, restarted): fail waiting requests, reconnect, reopen sessions.
    private func connectionLost(_ fd: FileDescriptor, generation: Int) {
        let (waiters, subscribers, shouldReconnect, refusal) = state.withLock { state -> ([Waiter], [Subscriber], Bool, TransferFailure?) in
            guard state.generation == generation else { return ([], [], false, nil) }
            state.descriptor = nil
            let refusal = state.refusal
            state.refusal = nil
            let waiters = state.waiters.sorted { $0.key < $1.key }.map(\.value) // failed in the order they were sent
            state.waiters.removeAll()
            let reconnect = !state.subscribers.isEmpty && !state.reconnecting
            if reconnect { state.reconnecting = true }
            return (waiters, Array(state.subscribers.values), reconnect, refusal)
        }
        fd.close()
        waiters.forEach { $0.answer(refusal.map(DaemonReply.failure)) }
        guard shouldReconnect else { return }
        log.notice("connection", "lost the transfer daemon; reconnecting")
        defer { state.withLock { $0.reconnecting = false } }
        // As long as a session is open here, try again (at most once a second): a daemon that
        // takes long to come back must not leave the app's sessions detached for good.
        var attempts = 0
        while !state.withLock({ $0.subscribers.isEmpty }) {
            do {
                try connect()
                subscribers.forEach { $0.onReconnect() }
                return
            } catch {
                attempts += 1
                if attempts == 40 { log.error("connection", "cannot reach the transfer daemon again (\(error)); trying every second while sessions are open") }
                usleep(UInt32(RetryPolicy.reconnect.backoff(beforeRetry: attempts) * 1_000_000))
            }
        }
    }
}
