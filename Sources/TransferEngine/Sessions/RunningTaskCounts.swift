import TransferContainer

/// How many of a session's tasks run, and how many of those wait for an answer to a
/// challenge: what the relaunch rules ask of every session at each housekeeping (every
/// 50 ms), kept up as the tasks change instead of counted through them each time (one app's
/// 20,000 tasks to a closed port made that count most of the daemon's work: issue 45).
struct RunningTaskCounts: Equatable {
    private(set) var running = 0
    private(set) var challenged = 0

    init() {}

    init<Tasks: Sequence>(_ tasks: Tasks) where Tasks.Element == TaskRecord {
        for task in tasks { add(task) }
    }

    /// Running tasks no challenge holds: transfers that may still end.
    var unchallenged: Int { running - challenged }

    mutating func add(_ task: TaskRecord?) { count(task, by: 1) }

    mutating func remove(_ task: TaskRecord?) { count(task, by: -1) }

    private mutating func count(_ task: TaskRecord?, by delta: Int) {
        guard let task, task.state == .running else { return }
        running += delta
        if task.pendingChallenge != nil { challenged += delta }
    }
}
