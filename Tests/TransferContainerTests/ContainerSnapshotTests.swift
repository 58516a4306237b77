#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
import ContainerInspection
import TransferCoding
import TransferPOSIX

@Suite("ContainerSnapshot")
struct ContainerSnapshotTests {
    /// A container with one session (a journal with two unfinished tasks, two events of which
    /// one is acknowledged, a corrupt line and a torn last line), an app registry and files in
    /// an app group.
    func makeContainer(_ directory: TemporaryDirectory) throws -> ContainerLayout {
        let layout = try directory.preparedLayout()
        let session = layout.sessionDirectory(family: sampleFamily, identifier: sampleSession)
        try DurableFile.makeDirectory(session.path)
        try RecordCoding.write(sampleSessionRecord(), to: session.appendingPathComponent("session.json").path)
        // Tasks 2, 3 and 10; event 1 ends task 3, event 2 task 5; a corrupt line; event 1 acknowledged; a torn last line.
        let encoder = RecordCoding.encoder(pretty: false)
        var journal = Data()
        for line in [JournalLine.task(sampleTask(10)), .task(sampleTask(2)), .task(sampleTask(3)), .event(sampleEvent(1, task: sampleTask(3))), .event(sampleEvent(2, task: sampleTask(5)))] {
            journal.append(try encoder.encode(line))
            journal.append(UInt8(ascii: "\n"))
        }
        journal.append(Data("{\"task\": {\"taskIdentifier\": 3, \"kind\": \"down\n".utf8))
        journal.append(try encoder.encode(JournalLine.acknowledged(through: 1)))
        journal.append(UInt8(ascii: "\n"))
        journal.append(Data("{\"task\": {\"taskId".utf8))
        try journal.write(to: URL(fileURLWithPath: JournalContents.path(inSession: session)))

        let group = layout.appGroup(sampleGroup)
        try DurableFile.makeDirectory(group.appendingPathComponent("Downloads/nested").path)
        try Data(repeating: 1, count: 5).write(to: group.appendingPathComponent("Downloads/five.bin"))
        try Data(repeating: 2, count: 1234).write(to: group.appendingPathComponent("Downloads/nested/big.bin"))
        try Data().write(to: group.appendingPathComponent("empty.txt"))

        let registry = """
        {"apps": {"com.example.host": {"executablePath": "/opt/host-app",
                  "identity": {"kind": "app", "containingApp": "com.example.host", "appGroups": ["group.com.example.transfers"]}}}}
        """
        try Data(registry.utf8).write(to: layout.appRegistry)
        return layout
    }

    @Test("sessions, tasks and pending events are listed; corrupt records are reported, not dropped silently")
    func sessions() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        let snapshot = ContainerSnapshot.read(layout)
        #expect(snapshot.container == layout.root.path)
        #expect(snapshot.sessions.count == 1)
        let session = try #require(snapshot.sessions.first)
        #expect(session.identifier == sampleSession.rawValue)
        #expect(session.family == sampleFamily.rawValue)
        #expect(session.owner == sampleOwner.rawValue)
        #expect(session.configuration == sampleSessionRecord().configuration)
        #expect(session.holderPID == nil)
        #expect(session.tasks.map(\.taskIdentifier) == [2, 10]) // sorted by number, not by name
        #expect(session.tasks.first == sampleTask(2))
        #expect(session.pendingEvents.count == 1)
        let event = try #require(session.pendingEvents.first)
        #expect(event.number == 2)
        #expect(event.kind == "taskCompleted")
        #expect(event.taskIdentifier == 5)
        #expect(event.url == "http://127.0.0.1:8080/files/5.bin")
        #expect(event.statusCode == 200)
        #expect(event.error?.code == TransferFailure.networkConnectionLost)
        #expect(event.downloadedFile == "/tmp/somewhere/2.download")
        #expect(session.unreadableRecords == ["journal.jsonl line 6"])
    }

    @Test("daemon.running is false when nobody holds the daemon lock, true with its pid when someone does")
    func daemon() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        var snapshot = ContainerSnapshot.read(layout)
        #expect(!snapshot.daemon.running)
        #expect(snapshot.daemon.pid == nil)

        let lock = try #require(acquiredLock(try FileLock.tryAcquire(layout.daemonLock.path)))
        snapshot = ContainerSnapshot.read(layout)
        #expect(snapshot.daemon.running)
        #expect(snapshot.daemon.pid == getpid())
        lock.release()
        snapshot = ContainerSnapshot.read(layout)
        #expect(!snapshot.daemon.running)
        #expect(snapshot.daemon.pid == nil) // a stale pid in the file is not shown
    }

    @Test("a session held by a process shows that process's pid")
    func sessionHolder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        let coordinator = SessionCoordinator()
        _ = try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("held") }
        #expect(ContainerSnapshot.read(layout).sessions.first?.holderPID == getpid())
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
        #expect(ContainerSnapshot.read(layout).sessions.first?.holderPID == nil)
    }

    @Test("app-group files are listed with their sizes, relative to the group")
    func appGroups() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        let snapshot = ContainerSnapshot.read(layout)
        #expect(snapshot.appGroups.map(\.identifier) == [sampleGroup.rawValue])
        let files = try #require(snapshot.appGroups.first?.files)
        #expect(files.map(\.path) == ["Downloads/five.bin", "Downloads/nested/big.bin", "empty.txt"])
        #expect(files.map(\.size) == [5, 1234, 0])
    }

    @Test("apps come from the registry")
    func apps() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        let apps = ContainerSnapshot.read(layout).apps
        #expect(apps.count == 1)
        #expect(apps.first?.bundleIdentifier == "com.example.host")
        #expect(apps.first?.kind == "app")
        #expect(apps.first?.executable == "/opt/host-app")
        #expect(apps.first?.appGroups == ["group.com.example.transfers"])
    }

    @Test("the session filter keeps one session; an unknown one leaves none")
    func filter() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        #expect(ContainerSnapshot.read(layout, sessionFilter: sampleSession.rawValue).sessions.count == 1)
        #expect(ContainerSnapshot.read(layout, sessionFilter: "com.example.other").sessions.isEmpty)
    }

    @Test("an empty or missing container reads as empty")
    func emptyContainer() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let empty = ContainerSnapshot.read(try directory.preparedLayout())
        #expect(empty.sessions.isEmpty && empty.apps.isEmpty && empty.appGroups.isEmpty && !empty.daemon.running)
        let missing = ContainerSnapshot.read(ContainerLayout(root: directory.url.appendingPathComponent("nowhere")))
        #expect(missing.sessions.isEmpty && missing.appGroups.isEmpty)
    }

    @Test("the snapshot encodes to JSON")
    func encodes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try makeContainer(directory)
        let data = try RecordCoding.encoder().encode(ContainerSnapshot.read(layout))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        #expect((object["sessions"] as? [Any])?.count == 1)
    }
}
