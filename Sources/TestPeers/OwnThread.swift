import Foundation

/// Runs `body` on a thread of its own and waits for it without holding one of Swift
/// concurrency's cooperative threads (two on this machine): a test that blocks for minutes (the
/// power-cut run, the chaos run) must not starve the suites that run beside it, whose time
/// limits go on counting while they wait for a thread. Expectations that fail inside `body`
/// still fail the run, with their file and line, but Swift Testing cannot name the test
/// they belong to (it knows the test from the task, which this thread is not part of).
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 16 << 20
        thread.start()
    }
}
