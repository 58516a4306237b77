import Foundation
import TransferContainer

/// The tasks that may start, in the order they should: best priority first, then oldest
/// (S5.3), kept in one lane per session and host, since each session's
/// `httpMaximumConnectionsPerHost` counts per host. Owned by the daemon's loop thread.
///
/// Built by looking at every task when something changed broadly (`replace`), then kept up
/// to date one task at a time (`insert`): a slot freed by a finished transfer goes to the
/// head of a lane without looking at the thousands of tasks behind it. The daemon looks
/// down the queue with a `Pass` (`next`, then `take` or `skip`), free to change the queue
/// between those calls.
struct ReadyQueue {
    /// A task that may start, with what its order and its lane need.
    struct Candidate {
        let session: DaemonSession
        let task: Int
        let priority: Float
        let createdAt: Date
        let lane: Lane

        /// Whether this one goes before `other`.
        func precedes(_ other: Candidate) -> Bool {
            priority != other.priority ? priority > other.priority : createdAt < other.createdAt
        }
    }

    /// A session's connections to one host.
    struct Lane: Hashable {
        var session: SessionKey
        var host: String
    }

    /// One lane's candidates, in order from `head` on.
    private struct Entries {
        var candidates: [Candidate] = []
        var head = 0
        var isEmpty: Bool { head == candidates.count }
    }

    private var lanes: [Lane: Entries] = [:]
    /// Set when the queue no longer says which tasks may start; the next `replace` clears it.
    var isStale = true
    /// Tasks the last look left out because they were held (conditions, dates, questions to
    /// the app); time alone can make them ready, so someone must look again later.
    var hasHeldTasks = false

    var count: Int { lanes.values.reduce(0) { $0 + $1.candidates.count - $1.head } }

    /// Replaces the queue with `candidates`, found by looking at every task.
    mutating func replace(with candidates: [Candidate], hasHeldTasks: Bool) {
        var grouped: [Lane: [Candidate]] = [:]
        for candidate in candidates { grouped[candidate.lane, default: []].append(candidate) }
        lanes = grouped.mapValues { Entries(candidates: $0.sorted { $0.precedes($1) }) }
        isStale = false
        self.hasHeldTasks = hasHeldTasks
    }

    /// Adds one task that became ready, in its place.
    mutating func insert(_ candidate: Candidate) {
        var entries = lanes.removeValue(forKey: candidate.lane) ?? Entries()
        var low = entries.head, high = entries.candidates.count
        while low < high {
            let middle = (low + high) / 2
            if entries.candidates[middle].precedes(candidate) || !candidate.precedes(entries.candidates[middle]) { low = middle + 1 } else { high = middle }
        }
        entries.candidates.insert(candidate, at: low)
        lanes[candidate.lane] = entries
    }

    /// Where one look down the queue has got to in each lane: past the lane's head once a
    /// candidate was skipped, and no further in a lane whose host had no room.
    struct Pass {
        fileprivate var cursors: [Lane: Int]
    }

    func beginPass() -> Pass {
        Pass(cursors: lanes.mapValues(\.head))
    }

    /// The best candidate left in this pass among lanes whose host has room (`hasRoom` of the
    /// lane's next candidate): lowest `rank` (`FairShare`), then `precedes`; nil when there
    /// is none. Leave it with `take` or `skip`.
    func next(in pass: inout Pass, hasRoom: (Candidate) -> Bool, rank: (Candidate) -> FairShare.Rank = { _ in FairShare.Rank(appTransfers: 0, sessionTransfers: 0) }) -> Candidate? {
        var best: (candidate: Candidate, rank: FairShare.Rank)?
        for (lane, cursor) in pass.cursors {
            guard let entries = lanes[lane], cursor < entries.candidates.count, hasRoom(entries.candidates[cursor]) else {
                pass.cursors[lane] = nil
                continue
            }
            let head = entries.candidates[cursor]
            let headRank = rank(head)
            if let best, best.rank < headRank || (best.rank == headRank && !head.precedes(best.candidate)) { continue }
            best = (head, headRank)
        }
        return best?.candidate
    }

    /// Each lane's next candidate and how many wait in it.
    func queuedByLane() -> [Lane: (first: Candidate, count: Int)] {
        var result: [Lane: (first: Candidate, count: Int)] = [:]
        for (lane, entries) in lanes where !entries.isEmpty {
            result[lane] = (entries.candidates[entries.head], entries.candidates.count - entries.head)
        }
        return result
    }

    /// The candidate `next` returned leaves the queue: started, or no longer ready.
    mutating func take(_ candidate: Candidate, in pass: inout Pass) {
        guard let cursor = pass.cursors[candidate.lane] else { return }
        pass.cursors[candidate.lane] = remove(candidate, at: cursor)
    }

    /// The candidate `next` returned stays queued but is passed over this time.
    func skip(_ candidate: Candidate, in pass: inout Pass) {
        pass.cursors[candidate.lane]? += 1
    }

    /// Removes a lane's candidate, expected at `index` (the daemon may have queued others
    /// since the pass began); returns where the lane is read from next (nil: it is empty).
    private mutating func remove(_ candidate: Candidate, at expected: Int) -> Int? {
        let lane = candidate.lane
        guard var entries = lanes.removeValue(forKey: lane) else { return nil }
        let isIt = { (other: Candidate) in other.task == candidate.task && other.session === candidate.session }
        let found = expected < entries.candidates.count && isIt(entries.candidates[expected]) ? expected
            : entries.candidates[entries.head...].firstIndex(where: isIt)
        guard let index = found else {
            lanes[lane] = entries
            return expected
        }
        var next = index
        if index == entries.head {
            entries.head += 1
            // Drop the consumed prefix now and then, not on every start.
            if entries.head >= 1024 && entries.head * 2 >= entries.candidates.count {
                entries.candidates.removeFirst(entries.head)
                entries.head = 0
            }
            next = entries.head
        } else {
            entries.candidates.remove(at: index) // behind a skipped one: rare
        }
        guard !entries.isEmpty else { return nil }
        lanes[lane] = entries
        return next
    }
}
