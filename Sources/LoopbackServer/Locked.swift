import Foundation

/// A value guarded by one lock that doubles as a condition variable.
///
/// The server keeps all state that several threads touch (routes, the request log,
/// live connections, lifecycle flags) in a single `Locked<ServerState>`, so there is
/// exactly one lock to reason about. Waiters (`waitForRequests`, `stop`, throttled
/// body writers) block on the same condition and are woken by `withLock(notify:)`.
final class Locked<State>: @unchecked Sendable {
    // @unchecked: every access to `state` goes through `condition`'s lock.
    private let condition = NSCondition()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access. With `notify`, wakes every waiter afterwards
    /// so it can re-check its predicate.
    func withLock<R>(notify: Bool = false, _ body: (inout State) throws -> R) rethrows -> R {
        condition.lock()
        defer {
            if notify { condition.broadcast() }
            condition.unlock()
        }
        return try body(&state)
    }

    /// Blocks until `predicate` holds or `deadline` passes (nil: no deadline).
    /// Returns whether the predicate held.
    func wait(until deadline: Date?, for predicate: (State) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !predicate(state) {
            if let deadline {
                if !condition.wait(until: deadline) { return predicate(state) }
            } else {
                condition.wait()
            }
        }
        return true
    }
}
