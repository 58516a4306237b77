import Foundation
import Testing
import BackgroundTransfer
import TransferContainer

extension InProcess {
/// A session whose tasks are large opens (issue 45, item 2): 400 tasks with 250 KB of
/// headers each (100 MB of records, past a holder's 64 MiB outbox when sent in one reply)
/// are listed whole by a process that opens the session, the daemon sending pages bounded in
/// bytes. The tasks are made by a raw client of the test app; the session is then opened
/// through the library.
@Suite(.serialized, .timeLimit(.minutes(10)))
final class LargeRecordPagesTests: InProcessSuite, @unchecked Sendable {
    @Test("400 tasks with 250 KB of headers each: the session opens and getAllTasks lists all 400, their headers whole")
    func largeTasksOpen() throws {
        let identifier = "pages"
        let count = 400
        let raw = try RawClient.attached(container, as: InProcess.app, session: identifier, group: InProcess.group)
        let headers = [HeaderField(name: "X-Pad", value: String(repeating: "h", count: 250_000))]
        for index in 0..<count {
            let creation = TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/pages/\(index)", headers: headers))
            guard case .task = try raw.request(.createTask(session: try SessionIdentifier(identifier), creation), timeout: 60) else {
                throw TestFailure("task \(index) was not created")
            }
        }
        raw.close()

        let delegate = RecordingDelegate()
        let session = fixture.session(identifier, delegate: delegate)
        let tasks = allTasks(session, timeout: 120)
        #expect(tasks?.count == count, "\(tasks?.count ?? -1) tasks listed of \(count); \(delegate.calls.suffix(3))")
        let header = tasks?.first?.originalRequest?.value(forHTTPHeaderField: "X-Pad")
        #expect(header?.utf8.count == 250_000, "the records come whole: \(header?.utf8.count ?? -1) header bytes")
    }
}
}
