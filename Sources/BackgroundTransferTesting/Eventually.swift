import TestPeers

/// Waits, on a thread of its own, until `condition` holds, looking every 20 ms: for facts no
/// event announces (a file another process writes, a server's count of bytes). Throws at the
/// deadline, saying what was expected.
/// - Parameters:
///   - timeout: seconds to wait at most.
///   - description: what the test waits for ("half the file sent"), for the failure.
///   - condition: the fact to wait for; called on the waiting thread.
public func eventually(within timeout: TimeInterval = 30, _ description: String, _ condition: @escaping @Sendable () -> Bool) async throws {
    _ = try await eventually(within: timeout, description) { condition() ? true : nil }
}

/// Waits until `value` returns something, and returns it; throws at the deadline.
func eventually<Value: Sendable>(within timeout: TimeInterval, _ description: String, _ value: @escaping @Sendable () -> Value?) async throws -> Value {
    let found = try await onOwnThread { () -> Value? in
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let found = value() { return found }
            usleep(20_000)
        } while Date() < deadline
        return value()
    }
    guard let found else { throw TestingFailure(expected: "\(description) within \(timeout) s", happened: "it did not happen") }
    return found
}
