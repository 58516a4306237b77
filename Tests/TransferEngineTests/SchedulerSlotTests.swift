import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX

/// The scheduler built on its own, with no daemon and no container on disk: its surroundings
/// are a stub that says which transfers are in flight. What `bgtransfer watch` and `inspect`
/// show of a task that may start but does not: every slot taken, and by whom.
@Suite struct SchedulerSlotTests {
    @Test("Every slot taken: a task that may start is shown waiting for a slot behind the sessions holding them, most first; a slot free: it is not")
    func slotWait() throws {
        // A container path nothing creates; the log writes errors only, and cannot (no folder).
        let layout = ContainerLayout(root: FileManager.default.temporaryDirectory.appendingPathComponent("never-made-\(UUID().uuidString)"))
        let parts = try SchedulerParts(layout: layout, root: RootDirectory.open("/"), log: TransferLog(layout: layout, process: "test", subsystem: "test", minimumLevel: .error),
                                       maximumConcurrentTransfers: 3)
        let a = try SessionKey(family: BundleIdentifier("com.example.a"), identifier: SessionIdentifier("com.example.a.background"))
        let b = try SessionKey(family: BundleIdentifier("com.example.b"), identifier: SessionIdentifier("com.example.b.background"))
        try parts.surroundings.run(TaskKey(session: b, task: 1))
        try parts.surroundings.run(TaskKey(session: a, task: 1))
        #expect(parts.scheduler.slotWait() == nil, "two of three slots taken")

        try parts.surroundings.run(TaskKey(session: a, task: 2))
        #expect(parts.scheduler.slotWait() == .waitingForSlot(behind: [
            SlotHolder(family: "com.example.a", session: "com.example.a.background", transfers: 2),
            SlotHolder(family: "com.example.b", session: "com.example.b.background", transfers: 1),
        ]))

        parts.surroundings.transfersInFlight[TaskKey(session: b, task: 1)] = nil // it ended
        #expect(parts.scheduler.slotWait() == nil, "a slot is free again")
    }
}
