import Foundation
import Testing
import TransferContainer
@testable import TransferTransport

/// The event loop's timers on its injected clock: a test moves a `ManualClock` and turns the
/// loop, as with swift-nio's `EmbeddedEventLoop.advanceTime(by:)`. No waiting.
@Suite struct EventLoopClockTests {
    @Test("A timer runs in the first turn at or after its time on the loop's clock, and not before, however the wall clock runs")
    func timerFollowsTheLoopsClock() throws {
        let clock = ManualClock()
        let loop = try EventLoop(clock: clock)
        var fired: [String] = []
        loop.schedule(after: 30) { fired.append("retry") }
        loop.schedule(at: clock.now.addingTimeInterval(10)) { fired.append("deadline") }
        #expect(loop.nextDeadline == clock.now.addingTimeInterval(10))
        loop.turn(maximumWait: 0)
        #expect(fired.isEmpty)
        clock.advance(by: 9.9)
        loop.turn(maximumWait: 0)
        #expect(fired.isEmpty, "0.1 s early on the loop's clock")
        clock.advance(by: 0.1)
        loop.turn(maximumWait: 0)
        #expect(fired == ["deadline"])
        #expect(loop.nextDeadline == clock.now.addingTimeInterval(20))
        clock.advance(by: 25)
        loop.turn(maximumWait: 0)
        #expect(fired == ["deadline", "retry"])
        #expect(loop.nextDeadline == nil)
    }

    @Test("A turn with a timer due on the loop's clock does not wait for the wall clock: it returns at once and runs it")
    func dueTimerEndsTheWait() throws {
        let clock = ManualClock()
        let loop = try EventLoop(clock: clock)
        var fired = false
        loop.schedule(after: 3600) { fired = true }
        clock.advance(by: 3600)
        let started = ContinuousClock.now
        loop.turn(maximumWait: 20)
        #expect(fired)
        #expect(ContinuousClock.now - started < .seconds(5), "the wait ends by the loop's clock, not 20 s later")
    }
}
