/// A value handed across a `@Sendable` boundary that the compiler cannot check: here
/// FoundationNetworking's completion handlers and body streams, handed back on its own queue.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
