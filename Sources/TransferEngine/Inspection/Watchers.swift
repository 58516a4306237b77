import Foundation
import TransferContainer
import TransferLogging
import TransferTransport

/// What the watchers see of the rest of the daemon: what runs, and the connections that
/// watch it. `TransferDaemon` answers (`TransferDaemon+WatcherSurroundings.swift`).
protocol WatcherSurroundings: AnyObject {
    /// The sessions whose running tasks a watcher is shown.
    var sessions: [SessionKey: DaemonSession] { get }
    /// The transfers in flight, by task: they know more than the records (bytes so far).
    var transfersInFlight: [TaskKey: any Transfer] { get }
    /// The connections that asked to watch.
    var watchingConnections: [ClientConnection] { get }
    /// Closes a watcher that stopped reading (or cannot take its first list).
    func disconnectWatcher(_ connection: ClientConnection)
}

/// Read-only watching (`DaemonRequest.watch`, `bgtransfer watch`): connections that asked are
/// pushed every running task of the container. A watcher is a connection with a flag, so it
/// goes away with the connection. Owned by the daemon's loop thread.
final class Watchers {
    private unowned let surroundings: any WatcherSurroundings
    /// Why a task that should run does not: its hold, or the slots all taken.
    private let scheduler: Scheduler
    private let log: TransferLog
    private let clock: any TimeSource
    var watchBroadcast = WatchBroadcast()

    init(surroundings: any WatcherSurroundings, scheduler: Scheduler, log: TransferLog, clock: any TimeSource) {
        self.surroundings = surroundings
        self.scheduler = scheduler
        self.log = log
        self.clock = clock
    }

    /// Makes the connection a watcher; it hears of the running tasks right after the reply.
    func startWatching(_ connection: ClientConnection, afterReply: inout [() -> Void]) -> DaemonReply {
        connection.isWatching = true
        log.info("ipc", "\(connection.label) watches the transfers")
        // The first list goes right behind the reply (which is still queued: the watcher's
        // "not read yet" rule must not hold back the list a `watch --once` waits for).
        afterReply.append { [unowned self] in
            guard !connection.isClosed, !connection.send(.push(.transfers(transferStatuses()))) else { return }
            surroundings.disconnectWatcher(connection)
        }
        return .ok
    }

    /// Pushes the running tasks to every watcher, about every 250 ms while anything runs and
    /// once more when nothing does. Called from housekeeping.
    func pushTransfersToWatchers(now: Date) {
        let watchers = surroundings.watchingConnections
        guard !watchers.isEmpty, now.timeIntervalSince(watchBroadcast.lastSent) >= WatchBroadcast.interval else { return }
        let statuses = transferStatuses()
        guard !(statuses.isEmpty && watchBroadcast.lastWasEmpty) else { return }
        watchBroadcast = WatchBroadcast(lastSent: now, lastWasEmpty: statuses.isEmpty)
        for watcher in watchers { send(statuses, toWatcher: watcher) }
    }

    /// A watcher that has not taken a push for this long is disconnected.
    static let watcherPatience: TimeInterval = 3

    /// Queues the list for the watcher, unless its previous push is still waiting: a watcher
    /// is never buffered for (it gets the next list when it has read), and one that takes
    /// nothing for `watcherPatience` is disconnected.
    private func send(_ statuses: [TransferStatus], toWatcher watcher: ClientConnection) {
        guard !watcher.isClosed else { return }
        if watcher.outboxBytes > 0 {
            let now = clock.now
            guard let since = watcher.watcherBehindSince else {
                watcher.watcherBehindSince = now
                return
            }
            if now.timeIntervalSince(since) >= Self.watcherPatience {
                log.error("ipc", "\(watcher.label) has not read what it watches for \(Int(Self.watcherPatience)) s; disconnecting it")
                surroundings.disconnectWatcher(watcher)
            }
            return
        }
        watcher.watcherBehindSince = nil
        guard !watcher.send(.push(.transfers(statuses))) else { return }
        log.error("ipc", "\(watcher.label) is not reading what it watches; disconnecting it")
        surroundings.disconnectWatcher(watcher)
    }

    /// Every task that should be running, in flight or waiting to be, by session and task.
    func transferStatuses() -> [TransferStatus] {
        var statuses: [TransferStatus] = []
        for session in surroundings.sessions.values {
            for task in session.tasks.values where task.state == .running {
                let transfer = surroundings.transfersInFlight[TaskKey(session: session.key, task: task.taskIdentifier)]
                // A transfer in flight knows more than the record, which is written at checkpoints.
                let known = (transfer?.task ?? task).progressBytes
                statuses.append(TransferStatus(
                    family: session.key.family, session: session.key.identifier, taskIdentifier: task.taskIdentifier,
                    kind: task.kind, state: task.state, url: task.originalRequest.url, taskDescription: task.taskDescription,
                    bytesDone: transfer?.bytesMoved ?? known.done, bytesExpected: known.expected,
                    isTransferring: transfer != nil, retryCount: task.retryCount,
                    waitingFor: transfer == nil ? task.hold(under: scheduler.conditions, now: clock.now) ?? scheduler.slotWait() : nil))
            }
        }
        return statuses.sorted { ($0.family.rawValue, $0.session.rawValue, $0.taskIdentifier) < ($1.family.rawValue, $1.session.rawValue, $1.taskIdentifier) }
    }
}

/// When the daemon last told its watchers what runs, and whether that was nothing.
/// Owned by the event loop.
struct WatchBroadcast {
    var lastSent = Date.distantPast
    var lastWasEmpty = true
    /// The loop turns at least every 250 ms; a little less here keeps pushes at about that pace.
    static let interval: TimeInterval = 0.2
}
