import Foundation
import Testing
import TransferContainer
import ContainerInspection
@testable import bgtransfer
import TransferLogging

/// The timeline draws a task's waits from the typed fact its log lines carry
/// (`LogEntry.hold`), whatever the lines' words say.
@Suite struct TimelineWaitTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func entry(_ seconds: Double, _ message: String, hold: TaskHold? = nil) -> LogEntry {
        LogEntry(time: start.addingTimeInterval(seconds), process: "transferd", pid: 41, subsystem: "transferd", category: "transfers",
                 level: .notice, message: message, session: "s", task: 1, hold: hold)
    }

    /// The task's waits (but the daemon's: no daemon runs, so the page takes it for killed).
    func waits(_ entries: [LogEntry]) throws -> [TimelineWait] {
        let container = try TestContainer()
        defer { container.tearDown() }
        let builder = TimelineBuilder(layout: container.layout, sessionFilter: nil, now: start.addingTimeInterval(60))
        return builder.build(entries: entries, hasLog: true, snapshot: ContainerSnapshot.read(container.layout), journal: .init()).waits.filter { $0.kind != .daemonDown }
    }

    @Test("A 429's Retry-After is drawn as the server's wait and a backoff as the daemon's, from the typed cause, whatever the line says")
    func retryWaitsFromTheTypedCause() throws {
        let asked = try waits([entry(1, "words that name no status", hold: .retry(attempt: 1, at: start.addingTimeInterval(31), cause: .serverAskedToWait(status: 429, seconds: 30)))])
        #expect(asked.map(\.kind) == [.retryAfter] && asked.first?.end == start.addingTimeInterval(31), "\(asked)")
        #expect(asked.first?.reason.contains(RetryCause.serverAskedToWait(status: 429, seconds: 30).description) == true)
        let backoff = try waits([entry(1, "HTTP 503, Retry-After 1 s; retry 1 in 0.25 s", hold: .retry(attempt: 1, at: start.addingTimeInterval(1.25), cause: .networkTrouble(code: -1005, message: "dropped")))])
        #expect(backoff.map(\.kind) == [.backoff], "the words are not read: \(backoff)")
        #expect(try waits([entry(1, "HTTP 503, Retry-After 1 s; retry 1 in 0.25 s")]).isEmpty, "no typed fact, no wait")
    }

    @Test("A wait for a transfer slot is drawn from the daemon's typed line until the transfer starts, naming whom it waited behind")
    func slotWait() throws {
        let behind = TaskHold.waitingForSlot(behind: [SlotHolder(family: "com.example.hog", session: "hog", transfers: 32)])
        let drawn = try waits([entry(1, "waiting for a transfer slot", hold: behind), entry(9, "started at offset 0")])
        #expect(drawn.count == 1 && drawn.first?.kind == .slot && drawn.first?.start == start.addingTimeInterval(1) && drawn.first?.end == start.addingTimeInterval(9), "\(drawn)")
        #expect(drawn.first?.reason == behind.description)
    }
}
