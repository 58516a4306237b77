import BackgroundTransfer
import TransferPOSIX

/// This process as an app (`com.example.bench`, declared in main.swift) with one background
/// session in a scratch container: for the figures a client sees from the inside.
///
/// The session does not ask for launch events, so the daemon never tries to launch the
/// benchmark. Each container gets its own app environment and session; a container's
/// daemon is ended by `BenchContainer.tearDown`.
struct BenchApp {
    static let sessionIdentifier = "com.example.bench.background"
    static let appGroup = "group.com.example.bench"

    let session: URLSession
    let delegate: BenchDelegate

    /// Opens the session in `container` (whose daemon must be running).
    init(entitlements: String, container: BenchContainer, delegate: BenchDelegate = BenchDelegate()) throws {
        _ = try BackgroundApplication(entitlements: entitlements, arguments: ["--container", container.layout.root.path])
        let configuration = URLSessionConfiguration.background(withIdentifier: Self.sessionIdentifier)
        configuration.sharedContainerIdentifier = Self.appGroup
        configuration.sessionSendsLaunchEvents = false
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        if let error = session.invalidationError { throw BenchError("cannot open the benchmark's session: \(error.localizedDescription)") }
        self.delegate = delegate
    }

    /// Every unfinished task, and how long `getAllTasks` took to call back, in milliseconds.
    func allTasks(timeout: TimeInterval = 120) throws -> (tasks: [URLSessionTask], milliseconds: Double) {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<(tasks: [URLSessionTask], end: Double)>(([], 0))
        let start = monotonicNow()
        session.getAllTasks { tasks in
            let end = monotonicNow()
            result.withLock { $0 = (tasks, end) }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else { throw BenchError("getAllTasks did not call back within \(Int(timeout)) s") }
        let (tasks, end) = result.withLock { $0 }
        return (tasks, (end - start) * 1000)
    }

    /// Starts a download of each URL and waits until all have completed; returns how long
    /// that took from the first creation to the last `didCompleteWithError`, in seconds.
    /// A download that failed, or whose file did not arrive, is an error.
    func download(_ urls: [URL], into directory: URL, timeout: TimeInterval) throws -> Double {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        delegate.expect(urls.count, movingTo: directory)
        let start = monotonicNow()
        for url in urls {
            session.downloadTask(with: url).resume()
        }
        let completions = try delegate.waitForExpected(timeout: timeout)
        let end = completions.map(\.monotonic).max() ?? monotonicNow()
        if let failed = completions.first(where: { $0.error != nil }) {
            throw BenchError("task \(failed.task) failed: \(failed.error!)")
        }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path).count) ?? 0
        guard files == urls.count else { throw BenchError("\(files) of \(urls.count) downloaded files arrived") }
        return end - start
    }
}

/// One `didCompleteWithError`, timed on entry.
struct Completion {
    var task: Int
    var error: String?
    /// CLOCK_REALTIME (comparable with the daemon's log) and the monotonic clock.
    var realtime: Double
    var monotonic: Double
}

/// The benchmark's session delegate: moves finished files where asked and records each
/// completion with the time it was called. Called on the session's serial delegate queue;
/// its state is behind a condition lock.
final class BenchDelegate: URLSessionDownloadDelegate, @unchecked Sendable {
    private let condition = NSCondition()
    private var completions: [Completion] = []
    private var expected = 0
    private var directory: URL?

    /// Forgets earlier completions; from now on finished files go into `directory`, named
    /// after their URL's last path component.
    func expect(_ count: Int, movingTo directory: URL?) {
        condition.lock()
        completions = []
        expected = count
        self.directory = directory
        condition.unlock()
    }

    /// Waits until the expected number of tasks has completed; returns their completions.
    func waitForExpected(timeout: TimeInterval) throws -> [Completion] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while completions.count < expected {
            guard condition.wait(until: deadline) else {
                throw BenchError("\(completions.count) of \(expected) tasks completed within \(Int(timeout)) s")
            }
        }
        return completions
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        condition.lock()
        let directory = self.directory
        condition.unlock()
        guard let directory, let name = downloadTask.originalRequest?.url?.lastPathComponent else { return }
        try? FileManager.default.moveItem(at: location, to: directory.appendingPathComponent(name))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let realtime = realtimeNow(), monotonic = monotonicNow()
        condition.lock()
        completions.append(Completion(task: task.taskIdentifier, error: error.map { "\($0.localizedDescription) (\(($0 as NSError).code))" }, realtime: realtime, monotonic: monotonic))
        condition.broadcast()
        condition.unlock()
    }
}
