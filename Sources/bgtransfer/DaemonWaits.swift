import Foundation
import TransferContainer
import ContainerInspection
import TransferPOSIX

/// What only the running daemon knows of waiting tasks — that a ready task waits for a
/// transfer slot, and behind whom (`TaskHold.waitingForSlot`) — laid over a snapshot read
/// from disk, so that `inspect` and the timeline say what `watch` says. One watch request;
/// runs on the calling thread, the request on one of its own so a daemon that does not
/// answer costs `patience` at most.
enum DaemonWaits {
    static let patience: TimeInterval = 2

    static func overlay(on snapshot: inout ContainerSnapshot, layout: ContainerLayout) {
        guard snapshot.daemon.running, let statuses = statuses(layout: layout) else { return }
        for status in statuses where !status.isTransferring {
            guard case .waitingForSlot? = status.waitingFor,
                  let index = snapshot.sessions.firstIndex(where: { $0.family == status.family.rawValue && $0.identifier == status.session.rawValue }),
                  snapshot.sessions[index].holds[String(status.taskIdentifier)] == nil else { continue }
            snapshot.sessions[index].setHold(status.waitingFor, forTask: status.taskIdentifier)
        }
    }

    /// The daemon's list of running tasks, or nil when it does not give one in time.
    private static func statuses(layout: ContainerLayout) -> [TransferStatus]? {
        let answer = Locked<[TransferStatus]?>(nil)
        let done = DispatchSemaphore(value: 0)
        let hello = Tool.hello
        Thread.detachNewThread {
            defer { done.signal() }
            try? DaemonEndpoint.stream(.watch, as: hello, layout: layout) { frame in
                guard case .push(.transfers(let statuses)) = frame else { return true }
                answer.withLock { $0 = statuses }
                return false
            }
        }
        guard done.wait(timeout: .now() + patience) == .success else { return nil }
        return answer.withLock { $0 }
    }
}
