internal import Glibc
import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX

/// What coalescing sees of the rest of the daemon (on the loop thread): the sessions, the
/// device's conditions (a follower held by them does not ride along) and delivery to
/// holders. `TransferDaemon` answers (`TransferDaemon+CoalescingSurroundings.swift`).
protocol CoalescingSurroundings: AnyObject {
    var sessions: [SessionKey: DaemonSession] { get }
    /// The device's conditions now (network, power), as the scheduler keeps them.
    var deviceConditions: DeviceConditions { get }
    /// Progress for the holder of `session`.
    func pushToHolder(_ push: DaemonPush, of session: DaemonSession)
}

/// Same-URL coalescing (S7.4), for sessions whose configuration asks for it
/// (`coalescesIdenticalDownloads`): download tasks of one session with the same GET are
/// fetched once. The first to start leads; the others wait, see its progress as their own,
/// and each gets its own copy of the file and its own completion when it finishes. If the
/// leader fails or stops, the others are scheduled as usual and one of them leads. Owned by
/// the daemon's loop thread.
final class Coalescing {
    private unowned let surroundings: any CoalescingSurroundings
    private let transfers: RunningTransfers
    private let completion: TaskCompletion
    private let root: RootDirectory
    private let clock: any TimeSource

    init(surroundings: any CoalescingSurroundings, transfers: RunningTransfers, completion: TaskCompletion, root: RootDirectory, clock: any TimeSource) {
        self.surroundings = surroundings
        self.transfers = transfers
        self.completion = completion
        self.root = root
        self.clock = clock
    }

    /// What makes two downloads the same fetch: nil for tasks that are never coalesced.
    func coalescingKey(_ task: TaskRecord, in session: DaemonSession) -> String? {
        guard session.record.configuration.coalescesIdenticalDownloads, task.kind == .download,
              !task.reportsResumeOffset, task.requestBodyLength == nil else { return nil }
        let request = task.requestToSend
        guard request.httpMethod.uppercased() == "GET" else { return nil }
        let headers = request.headers.map { "\($0.name.lowercased()): \($0.value)" }.sorted()
        return ([session.key.family.rawValue, session.key.identifier.rawValue, request.url] + headers).joined(separator: "\n")
    }

    /// The coalescing keys of the downloads in flight.
    func coalescedRequestsInFlight() -> Set<String> {
        var keys = Set<String>()
        for (key, transfer) in transfers.transfersByTask {
            if let session = surroundings.sessions[key.session], let request = coalescingKey(transfer.task, in: session) { keys.insert(request) }
        }
        return keys
    }

    /// The tasks riding on a download in flight: same session, same request, resumed and not held.
    func followers(of transfer: DownloadTransfer, in session: DaemonSession) -> [TaskRecord] {
        guard let request = coalescingKey(transfer.task, in: session) else { return [] }
        let now = clock.now
        return session.unfinishedTasks.filter { task in
            task.taskIdentifier != transfer.task.taskIdentifier && task.state == .running
                && transfers.transfersByTask[TaskKey(session: session.key, task: task.taskIdentifier)] == nil
                && task.hold(under: surroundings.deviceConditions, now: now) == nil
                && coalescingKey(task, in: session) == request
        }
    }

    /// The leader's progress, pushed as each follower's own (S7.3).
    func pushFollowerProgress(of transfer: DownloadTransfer, in session: DaemonSession) {
        guard session.holder != nil else { return }
        for follower in followers(of: transfer, in: session) {
            var progress = transfer.progress
            progress.taskIdentifier = follower.taskIdentifier
            surroundings.pushToHolder(.progress(session: session.key.identifier, progress), of: session)
        }
    }

    /// The leader finished with its body at `body`: each follower gets a copy under its own
    /// working name, synced before its completion event is written, and its own completion,
    /// before the leader's own is announced (the app may move that file at once).
    func completeFollowers(of transfer: DownloadTransfer, body: String, in session: DaemonSession) {
        for follower in followers(of: transfer, in: session) {
            var task = follower
            task.response = transfer.task.response
            task.validator = transfer.task.validator
            task.currentURL = transfer.task.currentURL
            task.countOfBytesReceived = transfer.task.countOfBytesReceived
            task.countOfBytesExpectedToReceive = transfer.task.countOfBytesExpectedToReceive
            let copy = session.bodyPath(ofFinished: task)
            do {
                // From the container's root: never from or to a file a symlink points at.
                let source = try root.open(body, O_RDONLY | O_NONBLOCK)
                defer { source.close() }
                let destination = try root.open(copy, O_WRONLY | O_CREAT | O_TRUNC)
                do { try source.copyAll(to: destination) } catch {
                    destination.close()
                    throw error
                }
                session.syncBeforeCommit(destination, path: copy)
                session.update(task)
            } catch {
                completion.fail(task, in: session, TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot copy the download of task \(transfer.task.taskIdentifier): \(error)", subject: copy))
                continue
            }
            completion.end(task, in: session, downloadedFile: session.finishedPath(for: task), note: "finished with task \(transfer.task.taskIdentifier), fetched once (coalesced): HTTP \(task.response?.statusCode ?? 0), \(task.countOfBytesReceived) bytes")
        }
    }
}
