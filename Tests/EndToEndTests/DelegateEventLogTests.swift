import Foundation
import Testing
import BackgroundTransferTesting

/// DelegateEventLog's checks on records written by hand: Apple's order (S3.2), nothing twice,
/// a line torn by a SIGKILL. One type, no processes.
@Suite(.timeLimit(.minutes(20)))
struct DelegateEventLogTests {
    /// Writes `calls` as the recorder would for process `pid`, in a folder of their own.
    func record(_ processes: [Int32: [(DelegateEvent.Kind, Int?)]], torn: Bool = false) throws -> (DelegateEventLog, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("events-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (pid, calls) in processes {
            var text = ""
            for (index, (kind, task)) in calls.enumerated() {
                let event = DelegateEvent(process: "app", pid: pid, sequence: index + 1, time: Date(timeIntervalSince1970: Double(pid)), kind: kind, session: "s", task: task)
                text += String(decoding: try JSONEncoder().encode(event), as: UTF8.self) + "\n"
            }
            if torn { text += "{\"process\":\"app\",\"pi" }
            try text.write(to: folder.appendingPathComponent("app-\(pid).jsonl"), atomically: true, encoding: .utf8)
        }
        return (DelegateEventLog(folder: folder), folder)
    }

    @Test("Apple's order passes; a completion before its finished download, a second urlSessionDidFinishEvents or a completion after it do not")
    func appleOrder() throws {
        let good: [(DelegateEvent.Kind, Int?)] = [(.didWriteData, 1), (.didFinishDownloadingTo, 1), (.didCompleteWithError, 1), (.didCompleteWithError, 2), (.didFinishEvents, nil)]
        let (log, folder) = try record([1: good])
        defer { try? FileManager.default.removeItem(at: folder) }
        try log.checkAppleOrder()
        #expect(log.all.count == 5)

        for bad: [(DelegateEvent.Kind, Int?)] in [
            [(.didCompleteWithError, 1), (.didFinishDownloadingTo, 1), (.didFinishEvents, nil)],
            [(.didCompleteWithError, 1), (.didFinishEvents, nil), (.didFinishEvents, nil)],
            [(.didFinishEvents, nil), (.didCompleteWithError, 1)],
        ] {
            let (log, folder) = try record([1: bad])
            defer { try? FileManager.default.removeItem(at: folder) }
            #expect(throws: TestingFailure.self) { try log.checkAppleOrder() }
        }
    }

    @Test("A wake of the same process (handleEventsForBackgroundURLSession recorded) starts a new batch with its own urlSessionDidFinishEvents; without it, an event after urlSessionDidFinishEvents is caught")
    func wakeStartsABatch() throws {
        let woken: [(DelegateEvent.Kind, Int?)] = [(.handleEventsForBackgroundURLSession, nil), (.didFinishEvents, nil),
                                                   (.handleEventsForBackgroundURLSession, nil), (.didFinishDownloadingTo, 1), (.didCompleteWithError, 1), (.didFinishEvents, nil)]
        let (log, folder) = try record([1: woken])
        defer { try? FileManager.default.removeItem(at: folder) }
        try log.checkAppleOrder()

        let unannounced: [(DelegateEvent.Kind, Int?)] = [(.handleEventsForBackgroundURLSession, nil), (.didFinishEvents, nil), (.didFinishDownloadingTo, 1), (.didCompleteWithError, 1), (.didFinishEvents, nil)]
        let (bad, badFolder) = try record([1: unannounced])
        defer { try? FileManager.default.removeItem(at: badFolder) }
        #expect(throws: TestingFailure.self) { try bad.checkAppleOrder() }
    }

    @Test("A completion delivered in two processes is caught, unless the first was killed before it acknowledged; a torn last line is no event")
    func deliveredTwice() throws {
        let (log, folder) = try record([1: [(.didCompleteWithError, 1)], 2: [(.didCompleteWithError, 1), (.didFinishEvents, nil)]], torn: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(log.all.map(\.pid) == [1, 2, 2], "process 1 first, the torn lines skipped")
        #expect(throws: TestingFailure.self) { try log.checkNothingDeliveredTwice() }
        try log.checkNothingDeliveredTwice(exceptFrom: [1])
        try log.checkAppleOrder() // each process's own order is Apple's
    }
}
