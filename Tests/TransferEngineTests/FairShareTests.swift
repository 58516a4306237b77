import Foundation
import Testing
import TransferContainer
@testable import TransferEngine

/// `FairShare` on its own: plain values and a given time, no daemon.
@Suite struct FairShareTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let policy = FairShare(limit: 32)

    func session(_ app: String, _ name: String = "s") -> SessionKey {
        SessionKey(family: try! BundleIdentifier(app), identifier: try! SessionIdentifier(name)) // constants of the test
    }

    func running(_ count: Int, in session: SessionKey, from first: Int = 1, startedAgo: TimeInterval = 60) -> [FairShare.Running] {
        (first..<first + count).map { FairShare.Running(task: TaskKey(session: session, task: $0), startedAt: now.addingTimeInterval(-startedAgo - Double($0) / 1000)) }
    }

    @Test("Shares: nobody gets more than it asks; the rest goes in equal parts to those who ask more")
    func shares() {
        let order = { (a: String, b: String) in a < b }
        #expect(FairShare.shares(of: 32, demand: ["a": 40, "b": 1], order: order) == ["a": 31, "b": 1])
        #expect(FairShare.shares(of: 32, demand: ["a": 40, "b": 40, "c": 40], order: order) == ["a": 10, "b": 11, "c": 11])
        #expect(FairShare.shares(of: 32, demand: ["a": 5, "b": 3], order: order) == ["a": 5, "b": 3])
        #expect(FairShare.shares(of: 32, demand: ["a": 20, "b": 20, "c": 2], order: order) == ["a": 15, "b": 15, "c": 2])
    }

    @Test("All 32 slots held by one app and another app waits: the most recently started transfer gives its slot back; with a slot free, none does")
    func oneAppGivesBack() {
        let hog = session("com.example.hog"), other = session("com.example.other")
        let all = running(32, in: hog)
        let given = policy.transfersToGiveBack(running: all, waiting: [other: 1], now: now)
        #expect(given == [TaskKey(session: hog, task: 1)], "the youngest")
        #expect(policy.transfersToGiveBack(running: Array(all.dropLast()), waiting: [other: 1], now: now).isEmpty)
        #expect(policy.transfersToGiveBack(running: all, waiting: [hog: 8], now: now).isEmpty, "an app waiting behind itself takes nothing from itself")
        #expect(policy.transfersToGiveBack(running: all, waiting: [other: 40], now: now).count == 16, "two apps asking more than half: half each")
    }

    @Test("A transfer that started less than 5 s ago keeps its slot; it gives it back once it has run that long")
    func minimumRun() {
        let hog = session("com.example.hog"), other = session("com.example.other")
        let young = running(32, in: hog, startedAgo: 1)
        #expect(policy.transfersToGiveBack(running: young, waiting: [other: 1], now: now).isEmpty)
        #expect(policy.transfersToGiveBack(running: young, waiting: [other: 1], now: now.addingTimeInterval(4.1)).count == 1)
    }

    @Test("Between the sessions of one app: a session waiting below its part of the app's share gets slots from the one above it")
    func sessionsOfOneApp() {
        let busy = session("com.example.app", "busy"), quiet = session("com.example.app", "quiet")
        let given = policy.transfersToGiveBack(running: running(32, in: busy), waiting: [quiet: 2], now: now)
        #expect(given.count == 2 && given.allSatisfy { $0.session == busy })
    }

    @Test("Who starts next: a task of the app holding fewer slots, then of its session holding fewer")
    func rank() {
        let hog = session("com.example.hog"), hogOther = session("com.example.hog", "t"), other = session("com.example.other")
        let counts = FairShare.Counts(running: running(3, in: hog).map(\.task) + running(1, in: hogOther, from: 10).map(\.task))
        #expect(counts.rank(of: other) < counts.rank(of: hogOther))
        #expect(counts.rank(of: hogOther) < counts.rank(of: hog))
        #expect(counts.holders() == [SlotHolder(family: "com.example.hog", session: "s", transfers: 3), SlotHolder(family: "com.example.hog", session: "t", transfers: 1)])
    }
}
