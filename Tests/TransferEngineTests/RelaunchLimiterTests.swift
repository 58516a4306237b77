import Foundation
import Testing
import TransferContainer
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

    /// Driven through the relauncher, with literal figures: the doubling is the daemon's to do,
    /// not this test's (a delay that grew by 60 s each time would give 60, 120, 180 …).
    @Test("Each background relaunch doubles the delay before the next (60, 120, 240, 480 s); a quiet period of twice the delay starts over at 60 s")
    func doubling() throws {
        let helpers = RelauncherTests()
        let fixture = try helpers.sessionWithEventWaiting { $0.relaunchDelay = 60 }
        let relauncher = fixture.daemon.relauncher
        let start = fixture.clock.now
        var launchedAt: [TimeInterval] = []
        var delays: [TimeInterval] = []
        /// Lets the relauncher decide now; a launch is recorded, attaches, then is ended and reaped.
        func turn() -> Bool {
            relauncher.relaunchWhereNeeded(now: fixture.clock.now)
            guard let launch = relauncher.launches[DaemonFixture.family] else { return false }
            launchedAt.append(fixture.clock.now.timeIntervalSince(start))
            delays.append(relauncher.relaunchLimiter[DaemonFixture.family]?.delay ?? -1)
            // The app opens the session it was launched for: a relaunch that works, which the
            // give-up rule (three failed relaunches) does not count.
            relauncher.launchAttached(SessionKey(family: DaemonFixture.family, identifier: launch.identifier))
            _ = helpers.end(launch.pid)
            relauncher.launchEnded(pid: launch.pid)
            return true
        }
        #expect(turn(), "the first launch comes at once")
        for gap: TimeInterval in [60, 120, 240] {
            fixture.clock.advance(by: gap - 1)
            #expect(!turn(), "no launch 1 s before the delay of \(gap) s is out")
            fixture.clock.advance(by: 1)
            #expect(turn(), "a launch once the delay of \(gap) s is out")
        }
        #expect(launchedAt == [0, 60, 180, 420])
        #expect(delays == [60, 120, 240, 480])

        // No relaunch for 960 s, twice the delay: the next one starts the limiter over.
        fixture.clock.advance(by: 960)
        #expect(turn())
        #expect(launchedAt.last == 1_380)
        #expect(delays.last == 60, "the limiter starts over after a quiet period: \(delays)")
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
