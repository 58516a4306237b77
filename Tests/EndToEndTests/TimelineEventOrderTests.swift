import Foundation
import Testing
import ContainerInspection
@testable import bgtransfer
import TransferLogging

/// The event list keeps the log's order among lines of the same time (issue 44: a relaunched
/// host's `urlSessionDidFinishEvents` was listed above the `didCompleteWithError` before it).
@Suite struct TimelineEventOrderTests {
    @Test("Lines logged in the same millisecond are listed in the log's order, task lines and session lines alike")
    func sameTimeKeepsLogOrder() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let time = Date(timeIntervalSince1970: 1_800_000_000.125)
        let session = "com.example.host.fetch.background"
        func line(_ message: String, task: Int?) -> LogEntry {
            LogEntry(time: time, process: "host-app", pid: 52, subsystem: "com.example.host", category: "delegate",
                     level: .notice, message: message, session: session, task: task)
        }
        let messages = ["didFinishDownloadingTo: task 1 moved to Downloads/a.bin",
                        "didCompleteWithError(nil): task 1, HTTP 200",
                        "didFinishDownloadingTo: task 2 moved to Downloads/b.bin",
                        "didCompleteWithError(nil): task 2, HTTP 200",
                        "urlSessionDidFinishEvents(forBackgroundURLSession: \(session))"]
        let entries = messages.map { line($0, task: Self.task(in: $0)) }
        let builder = TimelineBuilder(layout: container.layout, sessionFilter: nil, now: time.addingTimeInterval(60))
        let snapshot = ContainerSnapshot.read(container.layout)
        let timeline = builder.build(entries: entries, hasLog: true, snapshot: snapshot, journal: .init())
        let list = TimelineRenderer(timeline: timeline).eventList()
        let positions = messages.map { list.range(of: TimelineRenderer.escape($0))?.lowerBound }
        try #require(positions.allSatisfy { $0 != nil }, "every line is listed: \(list)")
        #expect(positions.map { $0! } == positions.map { $0! }.sorted(), "listed in the log's order: \(list)")
    }

    /// The task a stand-in's delegate line names ("… task N …"), if any.
    static func task(in message: String) -> Int? {
        guard let range = message.range(of: #"task [0-9]+"#, options: .regularExpression) else { return nil }
        return Int(message[range].dropFirst(5))
    }
}
