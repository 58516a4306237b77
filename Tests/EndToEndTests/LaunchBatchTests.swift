import Foundation
import Testing
@testable import BackgroundTransfer
import TransferContainer

/// The batches of a process launched for a session's events (S3.2), as values: what comes
/// after a batch's `urlSessionDidFinishEvents` is held for the next, and a process that stays
/// is woken for it once the daemon's word says it is whole. No daemon, no processes.
@Suite(.timeLimit(.minutes(20)))
struct LaunchBatchTests {
    static func event(_ number: UInt64) -> EventRecord {
        EventRecord(number: number, kind: .taskCompleted,
                    task: TaskRecord(taskIdentifier: Int(number), kind: .download, originalRequest: RequestRecord(url: "https://127.0.0.1/\(number)")))
    }

    @Test("Events before the word are delivered and wait for the handler; one after urlSessionDidFinishEvents is held, before and after the handler, not acknowledged; a process that exits is never woken")
    func heldAfterTheWord() {
        var batch = LaunchBatch()
        let first = batch.holds(Self.event(1), deliveredThrough: 0)
        #expect(!first)
        #expect(batch.acknowledgesOnCompletionHandler)
        #expect(batch.backlogWord() == .announce)
        let second = batch.holds(Self.event(2), deliveredThrough: 1)
        #expect(second, "after urlSessionDidFinishEvents: the next batch's")
        #expect(batch.backlogWord() == .nothing, "announced once; the word makes the held batch whole")
        #expect(batch.completionHandlerCalled(generation: 0, staying: false) == .nothing, "a process that exits is not woken")
        let third = batch.holds(Self.event(3), deliveredThrough: 1)
        #expect(third, "after the handler: a suspended app's")
        #expect(batch.backlogWord() == .nothing)
        #expect(batch.held.map(\.number) == [2, 3] && !batch.acknowledgesOnCompletionHandler)
        #expect(batch.completionHandlerCalled(generation: 0, staying: false) == nil, "called again: acknowledges nothing")
    }

    @Test("A duplicate the delegate saw is not held, nor an event sent again after a reattach held twice")
    func duplicates() {
        var batch = LaunchBatch()
        _ = batch.backlogWord()
        let seen = batch.holds(Self.event(4), deliveredThrough: 4)
        #expect(!seen, "seen already: only counted as received")
        let new = batch.holds(Self.event(5), deliveredThrough: 4)
        let again = batch.holds(Self.event(5), deliveredThrough: 4)
        #expect(new && again)
        #expect(batch.held.map(\.number) == [5])
    }

    @Test("A process that stays is woken once its held batch is whole: at the handler if the word came first, at the word otherwise; the woken batch is delivered, then announced")
    func wakeInPlace() {
        var batch = LaunchBatch()
        _ = batch.backlogWord()
        let first = batch.holds(Self.event(1), deliveredThrough: 0)
        #expect(first)
        #expect(batch.backlogWord() == .nothing)
        #expect(batch.completionHandlerCalled(generation: 0, staying: true) == .wake(generation: 1))
        let whileWaking = batch.holds(Self.event(2), deliveredThrough: 0)
        #expect(whileWaking, "while waking: held")
        let woken = batch.woken(generation: 1)
        #expect(woken.events.map(\.number) == [1, 2] && !woken.announce, "event 2 came after the word: the next word announces")
        #expect(batch.acknowledgesOnCompletionHandler && batch.held.isEmpty)
        #expect(batch.completionHandlerCalled(generation: 0, staying: true) == nil, "the launch's handler, called late, changes nothing")
        #expect(batch.backlogWord() == .announce)

        #expect(batch.completionHandlerCalled(generation: 1, staying: true) == .nothing, "nothing held")
        let third = batch.holds(Self.event(3), deliveredThrough: 2)
        #expect(third)
        #expect(batch.backlogWord() == .wake(generation: 2), "suspended: the word wakes it")
        let second = batch.woken(generation: 2)
        #expect(second.events.map(\.number) == [3] && second.announce)
    }

    @Test("A handler called inside handleEventsForBackgroundURLSession leaves the held batch for the next word, without waking again at once")
    func handlerCalledWhileWaking() {
        var batch = LaunchBatch()
        _ = batch.backlogWord()
        _ = batch.holds(Self.event(1), deliveredThrough: 0)
        _ = batch.backlogWord()
        #expect(batch.completionHandlerCalled(generation: 0, staying: true) == .wake(generation: 1))
        #expect(batch.completionHandlerCalled(generation: 1, staying: true) == .nothing, "no wake loop")
        let woken = batch.woken(generation: 1)
        #expect(woken.events.isEmpty && !woken.announce && batch.held.map(\.number) == [1])
        _ = batch.holds(Self.event(2), deliveredThrough: 0)
        #expect(batch.backlogWord() == .wake(generation: 2))
    }
}
