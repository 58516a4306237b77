import Foundation
import TransferPOSIX

/// Where the app's answer to one question goes: held while the bridge waits for the
/// delegate call (then given on the bridge's thread, FoundationNetworking's delegate queue),
/// else handed to that queue. Thread-safe (one lock).
final class ForegroundAnswer: @unchecked Sendable {
    private let queue: OperationQueue
    private let state = Locked<(waiting: Bool, held: (@Sendable () -> Void)?)>((true, nil))

    init(queue: OperationQueue) { self.queue = queue }

    func give(_ answer: @escaping @Sendable () -> Void) {
        let later = state.withLock { state -> Bool in
            guard state.waiting else { return true }
            state.held = answer
            return false
        }
        if later { queue.addOperation(answer) }
    }

    func endWait() {
        let held = state.withLock { state -> (@Sendable () -> Void)? in
            state.waiting = false
            defer { state.held = nil }
            return state.held
        }
        held?()
    }
}
