import Foundation

/// Runs `body` on a thread of its own without holding one of Swift concurrency's cooperative
/// threads (two on this machine): a test that blocks for minutes (the power-cut run, the chaos
/// run) must not starve the suites that run beside it, whose time limits go on counting while
/// they wait for a thread.
///
/// The body runs inside the calling task (on an actor whose executor is that thread), so its
/// task-locals come along: an `#expect` that fails inside it is recorded against its test.
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let executor = DedicatedThreadExecutor()
    defer { executor.finish() }
    return try await OwnThreadActor(executor: executor).run(body)
}

/// Where `onOwnThread` runs its body: an actor whose jobs run on a `DedicatedThreadExecutor`.
private actor OwnThreadActor {
    private let executor: DedicatedThreadExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(executor: DedicatedThreadExecutor) { self.executor = executor }

    func run<T: Sendable>(_ body: @Sendable () throws -> T) rethrows -> T { try body() }
}

/// A serial executor with one thread of its own, which runs the jobs enqueued on it in order
/// and ends once `finish()` is called and no job is left. Its queue is behind `condition`.
private final class DedicatedThreadExecutor: SerialExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    init() {
        let thread = Thread { [self] in runJobs() }
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

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func runJobs() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            guard !jobs.isEmpty else {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedSerialExecutor())
        }
    }
}
