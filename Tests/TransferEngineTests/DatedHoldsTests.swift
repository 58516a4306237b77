import Foundation
import Testing
@testable import TransferEngine
import TransferContainer

/// The scheduler's parking of tasks held until a date (`DatedHolds`): due in date order, a
/// task parked again for a later date is due then only, a task that ended is never due.
@Suite struct DatedHoldsTests {
    static func key(_ task: Int) -> TaskKey {
        TaskKey(session: SessionKey(family: try! BundleIdentifier("com.example.app"), identifier: try! SessionIdentifier("s")), task: task) // constants
    }

    @Test("Tasks come due in date order, each once, at their date and not before; a later parking supersedes an earlier one, and a forgotten task never comes due")
    func dueInOrder() {
        let start = Date(timeIntervalSince1970: 1_000)
        var holds = DatedHolds()
        for task in [3, 1, 2] { holds.park(Self.key(task), until: start.addingTimeInterval(Double(task))) }
        let again = holds.park(Self.key(1), until: start.addingTimeInterval(1))
        #expect(!again, "parked for that date already")
        holds.park(Self.key(2), until: start.addingTimeInterval(5)) // failed again: a later date
        holds.park(Self.key(4), until: start.addingTimeInterval(4))
        holds.forget(Self.key(4))
        #expect(holds.nextDue == start.addingTimeInterval(1))
        let early = holds.takeDue(now: start.addingTimeInterval(0.999))
        #expect(early.isEmpty)
        let atThree = holds.takeDue(now: start.addingTimeInterval(3))
        #expect(atThree == [Self.key(1), Self.key(3)])
        let atFourAndAHalf = holds.takeDue(now: start.addingTimeInterval(4.5))
        #expect(atFourAndAHalf.isEmpty, "task 2 is due at 5 now, task 4 ended")
        let atFive = holds.takeDue(now: start.addingTimeInterval(5))
        #expect(atFive == [Self.key(2)])
        #expect(holds.count == 0 && holds.nextDue == nil)
    }
}
