import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging

/// The scheduler's ready queue on its own: the order tasks start in, lanes whose host is
/// full, and tasks passed over, queued or removed while the scheduler looks down the queue.
@Suite final class ReadyQueueTests {
    let container: SessionFixture
    var session: DaemonSession { container.session }

    init() throws {
        container = try SessionFixture("ready-queue", identifier: "com.example.queue")
    }

    private func candidate(_ task: Int, host: String, priority: Float = 0.5, age: TimeInterval) -> ReadyQueue.Candidate {
        ReadyQueue.Candidate(session: session, task: task, priority: priority, createdAt: Date(timeIntervalSince1970: 1_000_000 - age),
                             lane: ReadyQueue.Lane(session: session.key, host: host))
    }

    /// Takes everything the queue offers in one pass, with `room` slots per host.
    private func drain(_ queue: inout ReadyQueue, room: [String: Int] = [:]) -> [Int] {
        var used: [String: Int] = [:]
        var started: [Int] = []
        var pass = queue.beginPass()
        while let next = queue.next(in: &pass, hasRoom: { used[$0.lane.host, default: 0] < room[$0.lane.host, default: .max] }) {
            used[next.lane.host, default: 0] += 1
            started.append(next.task)
            queue.take(next, in: &pass)
        }
        return started
    }

    @Test("Tasks start best priority first, then oldest, across hosts")
    func order() {
        var queue = ReadyQueue()
        queue.replace(with: [candidate(1, host: "a", age: 10), candidate(2, host: "b", age: 30), candidate(3, host: "a", priority: 1, age: 1),
                             candidate(4, host: "b", age: 20), candidate(5, host: "a", priority: 0, age: 100)], hasHeldTasks: false)
        #expect(!queue.isStale)
        #expect(drain(&queue) == [3, 2, 4, 1, 5])
        #expect(queue.count == 0)
    }

    @Test("A host with no room is passed over; its tasks stay queued for the next pass")
    func fullHost() {
        var queue = ReadyQueue()
        queue.replace(with: [candidate(1, host: "a", age: 50), candidate(2, host: "a", age: 40), candidate(3, host: "b", age: 10)], hasHeldTasks: false)
        #expect(drain(&queue, room: ["a": 1]) == [1, 3])
        #expect(queue.count == 1)
        #expect(drain(&queue) == [2])
    }

    @Test("A skipped task stays at its place; the ones behind it start")
    func skipped() {
        var queue = ReadyQueue()
        queue.replace(with: [candidate(1, host: "a", age: 50), candidate(2, host: "a", age: 40), candidate(3, host: "a", age: 30)], hasHeldTasks: false)
        var pass = queue.beginPass()
        let first = queue.next(in: &pass) { _ in true }!
        #expect(first.task == 1)
        queue.skip(first, in: &pass)
        let second = queue.next(in: &pass) { _ in true }!
        #expect(second.task == 2)
        queue.take(second, in: &pass)
        #expect(queue.next(in: &pass) { _ in true }?.task == 3)
        #expect(drain(&queue) == [1, 3])
    }

    @Test("A task queued later goes in its place, after older tasks of its priority")
    func inserted() {
        var queue = ReadyQueue()
        queue.replace(with: [candidate(1, host: "a", age: 50), candidate(2, host: "a", age: 10)], hasHeldTasks: false)
        queue.insert(candidate(3, host: "a", age: 30))
        queue.insert(candidate(4, host: "a", age: 10)) // as old as 2: after it
        queue.insert(candidate(5, host: "c", priority: 1, age: 0))
        #expect(drain(&queue) == [5, 1, 3, 2, 4])
    }

    @Test("A task queued while the scheduler looks down the queue does not make it take the wrong one")
    func insertedDuringAPass() {
        var queue = ReadyQueue()
        queue.replace(with: [candidate(1, host: "a", age: 50), candidate(2, host: "a", age: 40)], hasHeldTasks: false)
        var pass = queue.beginPass()
        let first = queue.next(in: &pass) { _ in true }!
        queue.insert(candidate(3, host: "a", age: 60)) // older: goes before 1
        queue.take(first, in: &pass)
        #expect(first.task == 1)
        #expect(drain(&queue) == [3, 2])
    }

    @Test("Thousands of starts from one lane keep the order")
    func longLane() {
        var queue = ReadyQueue()
        queue.replace(with: (0..<5000).map { candidate($0, host: "a", age: Double(10_000 - $0)) }, hasHeldTasks: true)
        #expect(queue.hasHeldTasks)
        var started: [Int] = []
        while queue.count > 0 { started += drain(&queue, room: ["a": 6]) }
        #expect(started == Array(0..<5000))
    }
}
