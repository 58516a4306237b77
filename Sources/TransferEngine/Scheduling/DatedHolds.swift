import Foundation
import TransferContainer

/// Tasks held only until a date that nothing moves earlier (a retry's backoff, an
/// `earliestBeginDate`), in the order they come due. A task parked here costs the scheduler
/// nothing until its date: it is not looked at on each pass, needs no timer of its own, and
/// its date coming makes only that task ready, not a look at every task (one app's 60,000
/// tasks to a closed port, each waking a look at every task at its retry, kept the daemon
/// busy and another app waiting seconds for its first byte: issue 45). Owned by the loop thread.
struct DatedHolds {
    /// A min-heap of parkings by date; an entry whose date is no longer its task's in
    /// `parkedUntil` was superseded and is dropped when it comes up.
    private var heap: [(due: Date, key: TaskKey)] = []
    /// The date each parked task waits for, by session: a look at every task skips a
    /// session's parked ones by their number alone, without reading their records.
    private var parkedUntil: [SessionKey: [Int: Date]] = [:]
    private(set) var count = 0

    /// The dates `session`'s parked tasks wait for, by task number.
    func parked(in session: SessionKey) -> [Int: Date] { parkedUntil[session] ?? [:] }

    /// The date of the first task to come due, if any waits.
    var nextDue: Date? { heap.first?.due }

    /// Whether a hold is one a task can be parked for: a date alone ends it. (The rate
    /// limiter's wait is not: the user bringing the app forward ends it early, S6.5.)
    static func date(of hold: TaskHold) -> Date? {
        switch hold {
        case .retry(_, let at, _): at
        case .earliestBeginDate(let date): date
        default: nil
        }
    }

    /// Parks `key` until `due`; returns whether that is new (false when it waits for that
    /// date already).
    @discardableResult
    mutating func park(_ key: TaskKey, until due: Date) -> Bool {
        let previous = parkedUntil[key.session, default: [:]].updateValue(due, forKey: key.task)
        guard previous != due else { return false }
        if previous == nil { count += 1 }
        heap.append((due, key))
        siftUp(heap.count - 1)
        return true
    }

    /// Takes out the tasks due at `now`, soonest first.
    mutating func takeDue(now: Date) -> [TaskKey] {
        var due: [TaskKey] = []
        while let first = heap.first, first.due <= now {
            removeFirst()
            guard parkedUntil[first.key.session]?[first.key.task] == first.due else { continue } // superseded
            remove(first.key)
            due.append(first.key)
        }
        return due
    }

    /// The task ended, or is looked at again: it no longer waits here. Its heap entry goes
    /// when it comes up, or when superseded entries outnumber the parked tasks (far begin
    /// dates of cancelled tasks).
    mutating func forget(_ key: TaskKey) {
        guard remove(key) else { return }
        guard heap.count > 2 * count + 1_024 else { return }
        heap = parkedUntil.flatMap { session, tasks in
            tasks.map { (due: $0.value, key: TaskKey(session: session, task: $0.key)) }
        }.sorted { $0.due < $1.due } // sorted: a heap
    }

    @discardableResult
    private mutating func remove(_ key: TaskKey) -> Bool {
        guard parkedUntil[key.session]?.removeValue(forKey: key.task) != nil else { return false }
        if parkedUntil[key.session]?.isEmpty == true { parkedUntil[key.session] = nil }
        count -= 1
        return true
    }

    private mutating func removeFirst() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].due < heap[parent].due else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].due < heap[smallest].due { smallest = left }
            if right < heap.count, heap[right].due < heap[smallest].due { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
