import Foundation

/// Runs `body` on a thread of its own and waits for it without holding one of Swift
/// concurrency's cooperative threads (two on this machine): a test that blocks for minutes (the
/// power-cut run, the chaos run) must not starve the suites that run beside it, whose time
/// limits go on counting while they wait for a thread.
///
/// The body runs inside the calling task, only on another executor: task-local values go
/// with it, so an expectation that fails inside `body` is recorded against the test that
/// called, not against an unknown one (Swift Testing knows the test from the task).
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let executor = OwnThreadExecutor()
    defer { executor.shutdown() }
    return try await withTaskExecutorPreference(executor) {
        try body()
    }
}

/// A task executor with one thread of its own, for one `onOwnThread` call: the jobs of the
/// calling task run there, in order, and may block as long as they like. Its queue is behind
/// a condition; the thread ends once `shutdown()` was called and the queue is empty.
final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var shuttingDown = false

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "onOwnThread"
        thread.stackSize = 16 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    func shutdown() {
        condition.lock()
        shuttingDown = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !shuttingDown { condition.wait() }
            if jobs.isEmpty { // shutting down, nothing left
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
