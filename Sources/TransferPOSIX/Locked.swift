import Foundation

/// A value behind one lock that doubles as a condition variable: the one way this project's
/// libraries share mutable state between threads. Waiters block in `wait(until:for:)` and
/// are woken by `withLock(notify: true)`.
public final class Locked<Value>: @unchecked Sendable {
    // @unchecked: every access to `value` goes through `condition`'s lock.
    // Visible to inlined code only (`withLock` below); nothing else touches them.
    @usableFromInline let condition = NSCondition()
    @usableFromInline var value: Value

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access; with `notify`, wakes every waiter afterwards so that
    /// it looks at its predicate again. Inlinable, so that callers in other modules get it
    /// specialized for their value and result: unspecialized, each call looked up the
    /// metadata of its result type at run time (`getAllTasks` takes one lock a task).
    @inlinable @discardableResult
    public func withLock<R>(notify: Bool = false, _ body: (inout Value) throws -> R) rethrows -> R {
        condition.lock()
        defer {
            if notify { condition.broadcast() }
            condition.unlock()
        }
        return try body(&value)
    }

    /// Blocks until `predicate` holds or `deadline` passes (nil: no deadline); whether it held.
    public func wait(until deadline: Date?, for predicate: (Value) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !predicate(value) {
            if let deadline {
                if !condition.wait(until: deadline) { return predicate(value) }
            } else {
                condition.wait()
            }
        }
        return true
    }
}
