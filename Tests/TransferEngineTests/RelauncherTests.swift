import Foundation
import Glibc
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX

/// The relaunch decision with a set clock: a session whose events wait and whom nobody holds
/// gets its app launched, one launch at a time, no sooner than the rate limiter allows, and
/// an app that overstays its background budget is killed. The "app" is a shell script.
@Suite struct RelauncherTests {
    /// Registers a stand-in for the host app: a script that sleeps (args ignored). A shell
    /// writes it, not this process: other tests' threads fork meanwhile, and a child that had
    /// not yet exec'd would hold the script open for writing, so that starting it fails with
    /// ETXTBSY (the likeliest cause of a launch that failed in a CI run).
    func registerApp(_ fixture: DaemonFixture) throws -> String {
        let script = fixture.root.appendingPathComponent("host-app").path
        let writer = try ProcessSpawner.spawn("/bin/sh", arguments: ["-c", "printf '#!/bin/sh\\nexec sleep 30\\n' > \"$1\" && chmod 755 \"$1\"", "sh", script], newSession: false)
        var status: Int32 = 0
        guard waitpid(writer, &status, 0) == writer, status == 0 else { throw TransferFailure(code: TransferFailure.unknown, message: "cannot write \(script)") }
        fixture.daemon.registry.register(ClientHello(identity: fixture.identity, executablePath: script, processName: "host-app", isForeground: true), at: fixture.clock.now)
        return script
    }

    /// A fixture whose session has an event waiting (a failed download) and nobody holding it.
    func sessionWithEventWaiting(_ configure: @escaping (inout TransferDaemon.Options) -> Void, app: Bool = true) throws -> DaemonFixture {
        let fixture = try DaemonFixture { options, _ in configure(&options) }
        if app { _ = try registerApp(fixture) }
        let task = try fixture.createDownload()
        fixture.daemon.completion.fail(task, in: fixture.session, TransferFailure(code: TransferFailure.cannotConnectToHost, message: "test"))
        return fixture
    }

    /// What the daemon logged about launches: why one did not happen.
    private func relaunchLog(_ fixture: DaemonFixture) -> [String] {
        TransferLog.entries(layout: fixture.daemon.layout).filter { $0.category == "relaunch" }.map(\.message)
    }

    /// Ends the launched process and reaps it, so that no test leaves a child behind.
    func end(_ pid: Int32) -> Int32 {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return status
    }

    @Test("Events waiting with nobody attached: the app is launched once, again only after the limiter's delay, which then doubles")
    func launchesByTheLimiter() throws {
        let fixture = try sessionWithEventWaiting { $0.relaunchDelay = 60 }
        let relauncher = fixture.daemon.relauncher
        #expect(relauncher.wantsRelaunch(fixture.session))

        relauncher.relaunchWhereNeeded(now: fixture.clock.now)
        let first = try #require(relauncher.launches[DaemonFixture.family], "no launch: \(relaunchLog(fixture))")
        #expect(relauncher.relaunchLimiter[DaemonFixture.family]?.delay == 60)
        relauncher.relaunchWhereNeeded(now: fixture.clock.now.addingTimeInterval(100))
        #expect(relauncher.launches[DaemonFixture.family]?.pid == first.pid, "one launch of an app at a time")
        _ = end(first.pid)
        relauncher.launchEnded(pid: first.pid)

        fixture.clock.advance(by: 59)
        relauncher.relaunchWhereNeeded(now: fixture.clock.now)
        #expect(relauncher.launches[DaemonFixture.family] == nil, "within the limiter's delay")
        fixture.clock.advance(by: 1)
        relauncher.relaunchWhereNeeded(now: fixture.clock.now)
        let second = try #require(relauncher.launches[DaemonFixture.family], "no launch: \(relaunchLog(fixture))")
        #expect(relauncher.relaunchLimiter[DaemonFixture.family]?.delay == 120)
        _ = end(second.pid)
        relauncher.launchEnded(pid: second.pid)
    }

    @Test("A session that does not ask for launch events, or whose app was force-quit, is never relaunched")
    func noLaunchWanted() throws {
        let quiet = try DaemonFixture { _, configuration in configuration.sessionSendsLaunchEvents = false }
        let task = try quiet.createDownload()
        quiet.daemon.completion.fail(task, in: quiet.session, TransferFailure(code: TransferFailure.cannotConnectToHost, message: "test"))
        #expect(!quiet.daemon.relauncher.wantsRelaunch(quiet.session))

        let forceQuit = try sessionWithEventWaiting({ _ in }, app: false)
        forceQuit.daemon.registry.setForceQuit(DaemonFixture.family, true)
        #expect(!forceQuit.daemon.relauncher.wantsRelaunch(forceQuit.session))
    }

    @Test("An app launched for events that overstays its background budget is killed when the clock passes it")
    func backgroundBudget() throws {
        let fixture = try sessionWithEventWaiting { $0.backgroundBudget = 30 }
        let relauncher = fixture.daemon.relauncher
        relauncher.relaunchWhereNeeded(now: fixture.clock.now)
        let launch = try #require(relauncher.launches[DaemonFixture.family], "no launch: \(relaunchLog(fixture))")
        relauncher.enforceBackgroundBudget(now: fixture.clock.now.addingTimeInterval(30))
        #expect(relauncher.launches[DaemonFixture.family]?.terminated == false, "within its budget")
        relauncher.enforceBackgroundBudget(now: fixture.clock.now.addingTimeInterval(30.5))
        #expect(relauncher.launches[DaemonFixture.family]?.terminated == true)
        var status: Int32 = 0
        #expect(waitpid(launch.pid, &status, 0) == launch.pid)
        #expect(status & 0x7f == SIGKILL, "killed, not exited (status \(status))")
        relauncher.launchEnded(pid: launch.pid)
    }
}

extension RelauncherTests {
    @Test("An app whose executable is gone is tried three times by the limiter, then not while the clock runs on, until the user launches it")
    func givesUpOnAMissingExecutable() throws {
        let fixture = try sessionWithEventWaiting({ $0.relaunchDelay = 1 }, app: false)
        fixture.daemon.registry.register(ClientHello(identity: fixture.identity, executablePath: fixture.root.appendingPathComponent("gone/host-app").path, processName: "host-app", isForeground: true), at: fixture.clock.now)
        let relauncher = fixture.daemon.relauncher
        for attempt in 1...3 {
            #expect(relauncher.wantsRelaunch(fixture.session), "attempt \(attempt) is wanted")
            relauncher.relaunchWhereNeeded(now: fixture.clock.now)
            #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family]?.failures == attempt)
            fixture.clock.advance(by: 10)
        }
        #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family]?.hasGivenUp == true)
        #expect(!relauncher.wantsRelaunch(fixture.session), "given up: the events wait for the user")
        relauncher.relaunchWhereNeeded(now: fixture.clock.now.addingTimeInterval(3600))
        #expect(relaunchLog(fixture).filter { $0.hasPrefix("cannot launch") }.count == 3, "not tried again")
        #expect(relaunchLog(fixture).filter { $0.hasPrefix("gave up relaunching") }.count == 1)

        relauncher.userLaunched(DaemonFixture.family)
        #expect(relauncher.wantsRelaunch(fixture.session), "a user launch makes relaunches worth trying again")
    }

    @Test("""
        A relaunch that works starts the count again: two failures, a launch that opens its session, \
        then two failures do not give up, a third does
        """)
    func aWorkingRelaunchResetsTheFailures() throws {
        let fixture = try sessionWithEventWaiting({ $0.relaunchDelay = 1 }, app: false)
        let gone = fixture.root.appendingPathComponent("gone/host-app").path
        let relauncher = fixture.daemon.relauncher
        func register(_ path: String) {
            let hello = ClientHello(identity: fixture.identity, executablePath: path, processName: "host-app",
                                    isForeground: true)
            fixture.daemon.registry.register(hello, at: fixture.clock.now)
        }
        func failOnce() {
            fixture.clock.advance(by: 100_000) // past any delay of the limiter
            relauncher.relaunchWhereNeeded(now: fixture.clock.now)
        }
        register(gone)
        failOnce()
        failOnce()
        #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family]?.failures == 2)

        _ = try registerApp(fixture)
        fixture.clock.advance(by: 100_000)
        relauncher.relaunchWhereNeeded(now: fixture.clock.now)
        let launch = try #require(relauncher.launches[DaemonFixture.family], "no launch: \(relaunchLog(fixture))")
        relauncher.launchAttached(fixture.session.key)
        #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family] == nil, "a launch that worked")
        _ = end(launch.pid)
        relauncher.launchEnded(pid: launch.pid)

        register(gone)
        failOnce()
        failOnce()
        #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family]?.failures == 2)
        #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family]?.hasGivenUp == false,
                "two failures in a row since the launch that worked: not given up")
        #expect(relauncher.wantsRelaunch(fixture.session))
        failOnce()
        #expect(fixture.daemon.registry.relaunchFailures[DaemonFixture.family]?.hasGivenUp == true,
                "the third in a row")
        #expect(relaunchLog(fixture).filter { $0.hasPrefix("gave up relaunching") }.count == 1)
    }
}
