import TransferContainer

/// A task in the daemon's namespace.
struct TaskKey: Hashable, Sendable {
    var session: SessionKey
    var task: Int
}
