import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferCoding
import TransferPOSIX
import TransferTransport
import TransferLogging

/// Taking up a session whose record cannot be used (`SessionRecovery.takeUpSessionLeftInFolder`):
/// who may, and what goes on. Session recovery is built on its own over the test's own
/// container, with no daemon.
@Suite final class SessionRecoveryTests {
    /// All session recovery sees of the daemon: its table of sessions.
    final class SessionTable: SessionRecoverySurroundings {
        var sessions: [SessionKey: DaemonSession] = [:]
    }

    let root: URL
    let layout: ContainerLayout
    let table = SessionTable()
    let recovery: SessionRecovery
    let rootDirectory: RootDirectory
    let family = try! BundleIdentifier("com.example.host")
    let group = try! BundleIdentifier("group.com.example.transfers")
    let identifier = try! SessionIdentifier("com.example.host.background")
    var key: SessionKey { SessionKey(family: family, identifier: identifier) }
    var directory: URL { layout.sessionDirectory(family: family, identifier: identifier) }
    var host: AppIdentity { AppIdentity(bundleIdentifier: family, kind: .app, containingApp: family, containingAppExecutable: "host-app", appGroups: [group]) }
    var fetchExtension: AppIdentity {
        AppIdentity(bundleIdentifier: try! BundleIdentifier("com.example.host.fetch"), kind: .appExtension, containingApp: family, containingAppExecutable: "host-app", appGroups: [group])
    }
    static let corrupt = Data("{\"version\": 1, \"owner\": ".utf8)

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("session-recovery-\(UUID().uuidString)")
        layout = ContainerLayout(root: root)
        try layout.prepare()
        let log = TransferLog(layout: layout, process: "transferd", subsystem: "com.example.transferd")
        rootDirectory = try RootDirectory.open(root.path)
        recovery = SessionRecovery(surroundings: table, layout: layout, log: log, root: rootDirectory, clock: ManualClock(),
                                   registry: AppRegistry(layout: layout, root: rootDirectory, log: log))
    }

    deinit {
        rootDirectory.descriptor.close()
        try? FileManager.default.removeItem(at: root)
    }

    /// A session folder with a corrupt record and a journal: task 4 unfinished, task 5
    /// finished (event 7, its file in `fileBase`), numbers up to task 9 and event 7 used.
    private func leaveSession(fileIn fileBase: URL) throws -> String {
        try DurableFile.makeDirectory(directory.path)
        try Self.corrupt.write(to: directory.appendingPathComponent("session.json"))
        let file = fileBase.appendingPathComponent("Library/Caches/BackgroundTransfer/\(identifier)/CFNetworkDownload_5.tmp").path
        var finished = TaskRecord(taskIdentifier: 5, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/five"))
        finished.state = .completed
        let lines: [JournalLine] = [
            .counters(JournalCounters(nextTaskIdentifier: 10, nextEventNumber: 7)),
            .task(TaskRecord(taskIdentifier: 4, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/four"))),
            .event(EventRecord(number: 7, kind: .taskCompleted, task: finished, downloadedFile: layout.recordPath(file))),
        ]
        var data = Data()
        for line in lines {
            data.append(try RecordCoding.encodeCompact(line))
            data.append(UInt8(ascii: "\n"))
        }
        try data.write(to: URL(fileURLWithPath: JournalContents.path(inSession: directory)))
        return file
    }

    private func configuration(sharedContainer: BundleIdentifier?) -> SessionConfiguration {
        var configuration = SessionConfiguration()
        configuration.sharedContainerIdentifier = sharedContainer
        return configuration
    }

    @Test("The containing app takes the session up: tasks, events and numbers go on, a fresh record names it owner, the old one is kept aside")
    func takenUpByTheApp() throws {
        _ = try leaveSession(fileIn: layout.privateContainer(family))
        try recovery.takeUpSessionLeftInFolder(key, configuration(sharedContainer: nil), for: host)
        let session = try #require(table.sessions[key])
        #expect(session.tasks.keys.sorted() == [4])
        #expect(session.events.keys.sorted() == [7])
        #expect(session.nextTaskIdentifier == 10)
        #expect(session.record.owner == family && session.record.nextEventNumber == 8)
        let record = try RecordCoding.read(SessionRecord.self, from: directory.appendingPathComponent("session.json").path)
        #expect(record.owner == family && record.nextTaskIdentifier == 10 && record.nextEventNumber == 8)
        #expect(FileManager.default.contents(atPath: directory.appendingPathComponent("session.json.unreadable").path) == Self.corrupt)
        let task = try session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/new")), inBackground: false, pendingFailure: nil, at: Date())
        #expect(task.taskIdentifier == 10)
    }

    @Test("An extension may not take up a session whose files lie in its containing app's private container; nothing changes")
    func refusedToAnExtensionNotEntitled() throws {
        _ = try leaveSession(fileIn: layout.privateContainer(family))
        #expect(throws: TransferFailure.self) {
            try recovery.takeUpSessionLeftInFolder(key, configuration(sharedContainer: group), for: fetchExtension)
        }
        #expect(table.sessions[key] == nil)
        #expect(FileManager.default.contents(atPath: directory.appendingPathComponent("session.json").path) == Self.corrupt)
    }

    @Test("An extension entitled to the app group the files lie in may take the session up")
    func takenUpByAnEntitledExtension() throws {
        _ = try leaveSession(fileIn: layout.appGroup(group))
        try recovery.takeUpSessionLeftInFolder(key, configuration(sharedContainer: group), for: fetchExtension)
        #expect(table.sessions[key]?.record.owner.rawValue == "com.example.host.fetch")
    }

    @Test("A folder with neither record nor journal (the client made it) is left for a new session")
    func newSessionFolder() throws {
        try DurableFile.makeDirectory(directory.path)
        try recovery.takeUpSessionLeftInFolder(key, configuration(sharedContainer: nil), for: host)
        #expect(table.sessions[key] == nil)
    }

    @Test("A record gone beside its journal: the journal is kept; numbers also go past the events the holder's delivered.json says it saw")
    func missingRecordAndDeliveredJson() throws {
        _ = try leaveSession(fileIn: layout.privateContainer(family))
        unlink(directory.appendingPathComponent("session.json").path)
        try Data("{\"version\":1,\"deliveredThrough\":12}".utf8).write(to: directory.appendingPathComponent("delivered.json"))
        try recovery.takeUpSessionLeftInFolder(key, configuration(sharedContainer: nil), for: host)
        let session = try #require(table.sessions[key])
        #expect(session.events.keys.sorted() == [7])
        #expect(session.record.nextEventNumber == 13, "no new event may look delivered already")
    }
}
