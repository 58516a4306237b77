import Foundation
import TransferContainer
import TransferPOSIX

/// Downloads carried out inside the app's own process, for default (foreground) sessions:
/// the same `DownloadTransfer` and libcurl loop the daemon uses, on a thread of their own.
/// Their partial files lie in the app's private container, so that resume data made from
/// them can be handed to a background session (issue "crash-proof": foreground → background).
///
/// Thread-safe: callers enqueue commands; the loop thread owns every transfer.
public final class LocalTransferRunner: @unchecked Sendable {
    /// What a local transfer reports, on the runner's thread.
    public struct Callbacks: Sendable {
        public var progress: @Sendable (TaskProgress) -> Void
        /// The transfer ended; on success the body is in the returned path.
        public var finished: @Sendable (TaskRecord, Result<String, TransferFailure>) -> Void
        /// Once, for a task that reports its resume offset: where the body continues, known
        /// from the server's answer (0 when the bytes on disk were of another version).
        public var resumed: (@Sendable (TaskRecord, Int64) -> Void)?

        public init(progress: @escaping @Sendable (TaskProgress) -> Void, finished: @escaping @Sendable (TaskRecord, Result<String, TransferFailure>) -> Void,
                    resumed: (@Sendable (TaskRecord, Int64) -> Void)? = nil) {
            self.progress = progress
            self.finished = finished
            self.resumed = resumed
        }
    }

    public static let shared = LocalTransferRunner()

    private let commands = NSLock()
    private var pending: [(EventLoop) -> Void] = []
    private var waker: CurlMulti.Waker?
    private let ready = DispatchSemaphore(value: 0)
    private var started = false

    private struct Running {
        var transfer: DownloadTransfer
        var callbacks: Callbacks
        var configuration: SessionConfiguration
        var tls: TLSPolicy
        var lastReport = Date.distantPast
        var proxy: String? { configuration.proxy(for: transfer.task.requestToSend.url) }
    }

    private init() {}

    /// Why the loop could not start (libcurl or the process out of resources); set before `ready`.
    private var loopFailure: TransferFailure?

    /// Starts the loop thread once; returns why it cannot run, if it cannot.
    private func startIfNeeded() -> TransferFailure? {
        commands.lock()
        let first = !started
        started = true
        commands.unlock()
        if first {
            let thread = Thread { [self] in runLoop() }
            thread.name = "BackgroundTransfer.LocalTransfers"
            thread.start()
            ready.wait()
        }
        commands.lock()
        defer { commands.unlock() }
        return loopFailure
    }

    /// Runs `command` on the loop thread; false when the loop cannot run (the command is dropped).
    @discardableResult
    private func enqueue(_ command: @escaping (EventLoop) -> Void) -> Bool {
        if startIfNeeded() != nil { return false }
        commands.lock()
        pending.append(command)
        let waker = self.waker
        commands.unlock()
        waker?.wakeup()
        return true
    }

    /// The session key of local transfers (their records never reach a daemon).
    private static let localKey: SessionKey? = {
        guard let family = try? BundleIdentifier("local"), let identifier = try? SessionIdentifier("local") else { return nil }
        return SessionKey(family: family, identifier: identifier)
    }()

    /// Starts a download of `task` into `partialPath` (resuming from its bytes with the task's validator).
    /// `tls` says how the server's chain is trusted (a chain the app accepted is pinned).
    package func start(_ task: TaskRecord, partialPath: String, configuration: SessionConfiguration, tls: TLSPolicy = .systemDefault, callbacks: Callbacks) {
        guard let key = Self.localKey else {
            callbacks.finished(task, .failure(TransferFailure(code: TransferFailure.unknown, message: "local transfers have no session key")))
            return
        }
        let accepted = enqueue { loop in
            self.begin(task, key: key, partialPath: partialPath, configuration: configuration, tls: tls, callbacks: callbacks, on: loop)
        }
        if !accepted, let failure = startIfNeeded() {
            callbacks.finished(task, .failure(failure))
        }
    }

    /// On the loop thread: starts one exchange of `task`; a download that cannot start ends.
    private func begin(_ task: TaskRecord, key: SessionKey, partialPath: String, configuration: SessionConfiguration, tls: TLSPolicy, callbacks: Callbacks, on loop: EventLoop) {
        do {
            let transfer = try DownloadTransfer(session: key, task: task, partialPath: partialPath, configuration: configuration, credentials: .none, tls: tls)
            if let resumed = callbacks.resumed { transfer.onResumed = { task, offset in resumed(task, offset) } }
            try loop.multi.add(transfer.easy)
            running[ObjectIdentifier(transfer.easy)] = Running(transfer: transfer, callbacks: callbacks, configuration: configuration, tls: tls)
            byTask[task.taskIdentifier] = ObjectIdentifier(transfer.easy)
        } catch {
            callbacks.finished(task, .failure(TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot start the download: \(error)", subject: partialPath)))
        }
    }

    /// Stops a download, keeping its partial file; returns the task as it stood (nil if it had ended).
    public func stop(taskIdentifier: Int) -> TaskRecord? {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<TaskRecord?>(nil)
        guard startIfNeeded() == nil else { return nil } // no loop: nothing runs
        enqueue { loop in
            if let id = self.byTask.removeValue(forKey: taskIdentifier), let running = self.running.removeValue(forKey: id) {
                loop.multi.remove(running.transfer.easy)
                running.transfer.close()
                result.withLock { $0 = running.transfer.task }
            }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }
    }

    // Loop-thread state.
    private var running: [ObjectIdentifier: Running] = [:]
    private var byTask: [Int: ObjectIdentifier] = [:]

    private func runLoop() {
        let loop: EventLoop
        do { loop = try EventLoop() } catch {
            // Every download of a default session then fails with this, none traps.
            commands.lock()
            loopFailure = TransferFailure(code: TransferFailure.unknown, message: "libcurl cannot start: \(error)")
            commands.unlock()
            ready.signal()
            return
        }
        commands.lock()
        waker = loop.multi.waker
        commands.unlock()
        ready.signal()
        loop.onTransferCompleted = { [unowned self] easy, result in
            guard let running = running.removeValue(forKey: ObjectIdentifier(easy)) else { return }
            byTask.removeValue(forKey: running.transfer.task.taskIdentifier)
            let succeeded: Bool
            if case .success = result { succeeded = true } else { succeeded = false }
            let task = running.transfer.finish(success: succeeded) { $0.close() } // a default session's file need not outlive a power cut
            if running.transfer.mustRestartFromZero {
                // The server's part was of another version (or another range): the bytes on
                // disk go and the whole resource is fetched again, with no validator to resume by.
                truncate(running.transfer.partialPath, 0)
                var restarted = task
                restarted.validator = nil
                restarted.countOfBytesReceived = 0
                begin(restarted, key: running.transfer.session, partialPath: running.transfer.partialPath, configuration: running.configuration, tls: running.tls, callbacks: running.callbacks, on: loop)
                return
            }
            if let failure = running.transfer.diskFailure ?? running.transfer.protocolFailure {
                running.callbacks.finished(task, .failure(failure))
            } else {
                switch result {
                case .success: running.callbacks.finished(task, .success(running.transfer.bodyPath))
                case .failure(let error) where error.isServerTrustFailure:
                    // Say what the server presented (S2.6): a handshake off this thread. After a
                    // redirect that is the target's chain (a default session does not follow one
                    // to another origin under a key accepted for the first: it fails, naming it).
                    let url = error.url ?? task.currentURL ?? task.requestToSend.url
                    let (proxy, tls, callbacks) = (running.proxy, running.tls, running.callbacks)
                    DispatchQueue.global().async {
                        let trust = try? ServerChainProbe.evaluate(url: url, policy: tls, proxy: proxy, timeout: 10).get()
                        callbacks.finished(task, .failure(error.transferFailure(url: url, serverTrust: trust)))
                    }
                case .failure(let error):
                    running.callbacks.finished(task, .failure(error.transferFailure(url: task.currentURL ?? task.requestToSend.url)))
                }
            }
        }
        loop.onTurn = { [unowned self] in
            commands.lock()
            let work = pending
            pending.removeAll()
            commands.unlock()
            work.forEach { $0(loop) }
            let now = Date()
            for (id, entry) in running where now.timeIntervalSince(entry.lastReport) >= 0.1 {
                let task = entry.transfer.task
                running[id]?.lastReport = now
                entry.callbacks.progress(TaskProgress(taskIdentifier: task.taskIdentifier, bytesWritten: 0, totalBytesWritten: task.countOfBytesReceived, totalBytesExpectedToWrite: task.countOfBytesExpectedToReceive, state: .running, currentURL: task.currentURL, response: task.response))
            }
        }
        loop.run()
    }
}

