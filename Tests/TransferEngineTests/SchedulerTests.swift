import Foundation
import Testing
import TransferContainer
@testable import TransferEngine

/// The scheduler on its own, with a set clock: what may start when. Nothing waits for real
/// time; a transfer that starts is only handed to libcurl (no loop turns).
@Suite struct SchedulerTests {
    @Test("A task waiting out a retry backoff starts when the clock passes its time, not a moment before")
    func retryBackoffHold() throws {
        let fixture = try DaemonFixture()
        var task = try fixture.createDownload()
        task.retryNotBefore = fixture.clock.now.addingTimeInterval(5)
        try fixture.session.update(task)
        let scheduler = fixture.daemon.scheduler
        scheduler.scheduleTransfers()
        scheduler.startReadyTransfers()
        #expect(!fixture.isTransferring(task))
        #expect(scheduler.datedHolds.count == 1 && !scheduler.readyQueue.hasHeldTasks, "parked until its date, not looked at meanwhile")
        fixture.clock.advance(by: 4.9)
        fixture.daemon.loop.turn(maximumWait: 0)
        scheduler.startReadyTransfers()
        #expect(!fixture.isTransferring(task))
        fixture.clock.advance(by: 0.1)
        fixture.daemon.loop.turn(maximumWait: 0) // the scheduler's wake: this task alone queues
        scheduler.startReadyTransfers()
        #expect(fixture.isTransferring(task))
        #expect(scheduler.datedHolds.count == 0)
    }

    @Test("A task created in the background waits out its app's rate limiter; a quiet period of twice the delay lets the next start at once")
    func rateLimitedStart() throws {
        let fixture = try DaemonFixture()
        let relauncher = fixture.daemon.relauncher
        #expect(relauncher.rateLimitedStart(for: fixture.identity) == nil, "no relaunch yet: nothing to wait out")
        relauncher.relaunchLimiter[DaemonFixture.family] = RelaunchLimiter(delay: 60, lastLaunch: fixture.clock.now)
        #expect(relauncher.rateLimitedStart(for: fixture.identity) == fixture.clock.now.addingTimeInterval(60))
        var task = try fixture.createDownload(inBackground: true)
        task.rateLimitedUntil = relauncher.rateLimitedStart(for: fixture.identity)
        try fixture.session.update(task)
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(!fixture.isTransferring(task))
        fixture.clock.advance(by: 60)
        fixture.daemon.scheduler.scheduleTransfers()
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(fixture.isTransferring(task))
        fixture.clock.advance(by: 60)
        #expect(relauncher.rateLimitedStart(for: fixture.identity) == nil, "quiet for twice the delay")
    }

    @Test("httpMaximumConnectionsPerHost bounds the transfers to one host; the global limit bounds them all; the oldest go first")
    func connectionLimits() throws {
        let fixture = try DaemonFixture { options, configuration in
            configuration.httpMaximumConnectionsPerHost = 2
            options.maximumConcurrentTransfers = 32
        }
        var tasks: [TaskRecord] = []
        for _ in 0..<5 {
            tasks.append(try fixture.createDownload())
            fixture.clock.advance(by: 1)
        }
        fixture.daemon.scheduler.scheduleTransfers()
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(tasks.map(fixture.isTransferring) == [true, true, false, false, false])

        let global = try DaemonFixture { options, configuration in
            configuration.httpMaximumConnectionsPerHost = 10
            options.maximumConcurrentTransfers = 3
        }
        for _ in 0..<5 { _ = try global.createDownload() }
        global.daemon.scheduler.scheduleTransfers()
        global.daemon.scheduler.startReadyTransfers()
        #expect(global.daemon.transfers.transfersByTask.count == 3)
    }

    @Test("Once a host answered over HTTP/2, httpMaximumConnectionsPerHost counts connections of many streams: more of its transfers run at once")
    func multiplexedHost() throws {
        let fixture = try DaemonFixture { _, configuration in configuration.httpMaximumConnectionsPerHost = 2 }
        var tasks: [TaskRecord] = []
        for _ in 0..<5 { tasks.append(try fixture.createDownload()) }
        var answered = tasks[0]
        answered.networkProtocolName = "http/1.1"
        fixture.daemon.scheduler.learnProtocol(of: answered)
        fixture.daemon.scheduler.scheduleTransfers()
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(fixture.daemon.transfers.transfersByTask.count == 2, "HTTP/1.1: one transfer a connection")
        answered.networkProtocolName = "h2"
        fixture.daemon.scheduler.learnProtocol(of: answered)
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(fixture.daemon.transfers.transfersByTask.count == 5)
    }

    @Test("HTTP/2 on one port of a host does not widen another port of it, which may speak HTTP/1.1")
    func multiplexingIsPerOrigin() throws {
        let fixture = try DaemonFixture { _, configuration in configuration.httpMaximumConnectionsPerHost = 2 }
        var answered = try fixture.createDownload(url: "https://127.0.0.1:8443/file")
        answered.networkProtocolName = "h2"
        answered.state = .suspended
        try fixture.session.update(answered)
        fixture.daemon.scheduler.learnProtocol(of: answered)
        let plain = try (0..<4).map { _ in try fixture.createDownload(url: "http://127.0.0.1:9/file") }
        fixture.daemon.scheduler.scheduleTransfers()
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(plain.filter(fixture.isTransferring).count == 2)
    }

    @Test("A suspended task never starts, whatever the clock says")
    func suspended() throws {
        let fixture = try DaemonFixture()
        var task = try fixture.createDownload()
        task.state = .suspended
        try fixture.session.update(task)
        fixture.clock.advance(by: 1e6)
        fixture.daemon.scheduler.scheduleTransfers()
        fixture.daemon.scheduler.startReadyTransfers()
        #expect(!fixture.isTransferring(task))
    }
}
