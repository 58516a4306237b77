import Foundation
import Testing
@testable import TransferEngine

/// The resume rate limiter (S6.5) with the time given: no waiting.
@Suite struct RelaunchLimiterTests {
    let start = Date(timeIntervalSince1970: 1_700_000_000)

    @Test("A launch waits out the delay since the last one; a quiet period of twice the delay starts the limiter over")
    func delayAndQuietPeriod() {
        let limiter = RelaunchLimiter(delay: 60, lastLaunch: start)
        #expect(!limiter.allowsLaunch(at: start.addingTimeInterval(59.9)))
        #expect(limiter.allowsLaunch(at: start.addingTimeInterval(60)))
        #expect(!limiter.hasLapsed(at: start.addingTimeInterval(119.9)))
        #expect(limiter.hasLapsed(at: start.addingTimeInterval(120)))
        #expect(!limiter.allowsLaunch(at: start.addingTimeInterval(-1)), "a clock set back does not open the gate")
    }

    @Test("Each background relaunch doubles the delay before the next (60, 120, 240 s …)")
    func doubling() {
        var limiter = RelaunchLimiter(delay: 60, lastLaunch: start)
        var now = start
        var delays: [TimeInterval] = []
        for _ in 0..<4 {
            now = now.addingTimeInterval(limiter.delay)
            #expect(limiter.allowsLaunch(at: now) && !limiter.hasLapsed(at: now))
            limiter = RelaunchLimiter(delay: limiter.delay * 2, lastLaunch: now)
            delays.append(limiter.delay)
        }
        #expect(delays == [120, 240, 480, 960])
    }
}

/// Giving up on relaunches that fail (issue 26, item 5), with the time given: no daemon.
@Suite struct RelaunchGiveUpPolicyTests {
    let start = Date(timeIntervalSince1970: 1_700_000_000)

    @Test("Three failed relaunches in a row give up, once, at the third one's time; fewer do not")
    func givesUpAfterThree() {
        var policy = RelaunchGiveUp()
        let gaveUp = [0, 1, 3, 7].map { policy.failed(at: start.addingTimeInterval($0)) }
        #expect(gaveUp == [false, false, true, false], "the third failure gives up, and says so once")
        #expect(policy.gaveUpAt == start.addingTimeInterval(3) && policy.failures == 3)
    }
}
