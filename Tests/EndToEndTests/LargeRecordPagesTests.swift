import Foundation
import Testing
import BackgroundTransfer
import TransferContainer

extension InProcess {
/// A session whose tasks are large opens (issue 45, item 2): 1,200 tasks with 250 KB of
/// headers each (300 MB of records, past the 256 MiB a reply may have when sent in one) are
/// listed whole by a process that opens the session, the daemon sending pages bounded in bytes.
/// The app's byte budget is raised for it (records can grow past it after creation, as a
/// challenge's chain does). The tasks are made by a raw client of the test app; the session
/// is then opened through the library.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class LargeRecordPagesTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    @Test("1,200 tasks with 250 KB of headers each: the session opens and getAllTasks lists them all, their headers whole")
    func largeTasksOpen() throws {
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--max-bytes-per-app", String(1 << 30)])
        let identifier = "pages"
        let count = 1_200
        let raw = try RawClient.attached(container, as: InProcess.app, session: identifier, group: InProcess.group)
        let headers = [HeaderField(name: "X-Pad", value: String(repeating: "h", count: 250_000))]
        for index in 0..<count {
            let request = RequestRecord(url: "http://127.0.0.1:9/pages/\(index)", headers: headers)
            let creation = TaskCreation(kind: .download, request: request)
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
