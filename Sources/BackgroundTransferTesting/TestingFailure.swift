/// Why a call of this library did not get what a test asked for: what was expected, and what
/// happened instead (with the path, pid or identifier concerned). Thrown from any thread; a
/// value.
public struct TestingFailure: Error, CustomStringConvertible, Sendable {
    /// What the test asked for ("reader-app exits within 30 s").
    public let expected: String
    /// What was found instead ("it still runs, pid 4242").
    public let happened: String

    /// A failure saying what was expected and what happened.
    public init(expected: String, happened: String) {
        self.expected = expected
        self.happened = happened
    }

    /// "expected …; …", one line for a test's failure report.
    public var description: String { "expected \(expected); \(happened)" }
}
