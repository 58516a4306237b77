import Foundation
import Testing
import TransferPOSIX

/// `ProcessHandle.waitForExit(within:)`: a pidfd wait that ends when the process does, and
/// at the deadline when it does not. Real children (`/bin/sleep`), each ended by its pid.
@Suite struct ProcessHandleTests {
    @Test("A wait ends as soon as the child exits, long before its deadline, and leaves its status to wait4")
    func endsAtTheExit() throws {
        let pid = try ProcessSpawner.spawn("/bin/sleep", arguments: ["0.2"], newSession: false)
        let handle = try ProcessHandle.open(pid: pid)
        defer { handle.close() }
        let start = Date()
        #expect(handle.waitForExit(within: 30))
        let waited = Date().timeIntervalSince(start)
        #expect(waited >= 0.15 && waited < 10, "waited \(waited) s for a 0.2 s sleep")
        #expect(!handle.isRunning)
        var status: Int32 = -1
        #expect(waitpid(pid, &status, 0) == pid, "the exit status is still there to collect")
        #expect(status == 0)
    }

    @Test("A wait for a child that outlives it returns false at its deadline (0, 0.3 s; a negative or NaN wait is 0)")
    func endsAtTheDeadline() throws {
        let pid = try ProcessSpawner.spawn("/bin/sleep", arguments: ["60"], newSession: false)
        let handle = try ProcessHandle.open(pid: pid)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            handle.close()
        }
        for instant in [0, -1, Double.nan] {
            #expect(!handle.waitForExit(within: instant), "wait of \(instant) s")
        }
        let start = Date()
        #expect(!handle.waitForExit(within: 0.3))
        let waited = Date().timeIntervalSince(start)
        #expect(waited >= 0.29 && waited < 10, "waited \(waited) s of 0.3 s")
        #expect(handle.isRunning)
        kill(pid, SIGKILL)
        #expect(handle.waitForExit(within: .infinity), "a killed child's handle reports its end; an endless wait is bounded, not a trap")
    }
}
