import Foundation
import Testing
import TestPeers

/// `onOwnThread`, which the long blocking tests run on: an expectation that fails inside it
/// belongs to its test.
struct OwnThreadTests {
    /// `withKnownIssue` sees only issues recorded against its own test: a failure recorded
    /// against no test («unknown») would be missed here, and fail the run instead.
    @Test func aFailedExpectationInsideIsRecordedAgainstItsTest() async throws {
        await withKnownIssue("recorded inside the body, on the body's own thread") {
            try await onOwnThread {
                #expect(Bool(false), "deliberately failed inside onOwnThread")
            }
        }
    }
}
