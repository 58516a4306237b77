import Foundation
import Testing
import TransferContainer
@testable import TransferEngine

/// Event delivery and group commit on their own: events are kept until acknowledged, an
/// acknowledgement past the last event is refused, and what a commit wrote is what a new
/// daemon reads. No holder is attached, so nothing is pushed; no loop turns.
@Suite struct EventDeliveryTests {
    /// A fixture whose session has ended `count` tasks (one event each).
    private func endedTasks(_ count: Int) throws -> DaemonFixture {
        let fixture = try DaemonFixture()
        for _ in 0..<count {
            let task = try fixture.createDownload()
            fixture.daemon.completion.fail(task, in: fixture.session, TransferFailure(code: TransferFailure.cannotConnectToHost, message: "test"))
        }
        return fixture
    }

    @Test("Events stay until acknowledged, in order; acknowledging through one number takes it and those before, and the journal on disk agrees after a commit")
    func acknowledgement() throws {
        let fixture = try endedTasks(3)
        #expect(fixture.session.pendingEvents.map(\.number) == [1, 2, 3])
        try fixture.daemon.delivery.acknowledge(through: 2, in: fixture.session)
        #expect(fixture.session.pendingEvents.map(\.number) == [3])
        fixture.daemon.commits.commitAndWait()
        let onDisk = try JournalContents.read(session: fixture.session.directory)
        #expect(onDisk.events.keys.sorted() == [3])
        #expect(onDisk.tasks.isEmpty)
    }

    @Test("Acknowledging past the last event (UInt64.max among them) is refused and changes nothing, on disk either")
    func pastTheLast() throws {
        let fixture = try endedTasks(2)
        for through in [3, 1_000, UInt64.max] as [UInt64] {
            #expect(throws: TransferFailure.self) { try fixture.daemon.delivery.acknowledge(through: through, in: fixture.session) }
        }
        #expect(fixture.session.pendingEvents.map(\.number) == [1, 2])
        fixture.daemon.commits.commitAndWait()
        #expect(try JournalContents.read(session: fixture.session.directory).events.keys.sorted() == [1, 2])
    }

    @Test("A task created and not yet committed is on disk after the group commit, with the daemon's clock as its creation time")
    func groupCommit() throws {
        let fixture = try DaemonFixture()
        let task = try fixture.createDownload()
        #expect(fixture.session.needsCommit)
        fixture.daemon.commits.commitAndWait()
        #expect(!fixture.session.needsCommit)
        let onDisk = try #require(try JournalContents.read(session: fixture.session.directory).tasks[task.taskIdentifier])
        #expect(onDisk.createdAt == fixture.clock.now)
        #expect(onDisk.state == .running)
    }
}
