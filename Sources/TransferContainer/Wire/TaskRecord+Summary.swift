import Foundation

extension TaskRecord {
    /// Takes the state and byte counts of `summary`, a summary of this record's revision.
    /// Writes nothing when they are the same (most tasks at each listing), so that a record
    /// shared with another copy is not copied; else copies the fields once, not once a field.
    public mutating func take(_ summary: TaskSummary) {
        guard TaskSummary(of: self) != summary else { return }
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        storage.fields.state = summary.state
        storage.fields.countOfBytesReceived = summary.countOfBytesReceived
        storage.fields.countOfBytesExpectedToReceive = summary.countOfBytesExpectedToReceive
        storage.fields.countOfBytesSent = summary.countOfBytesSent
        storage.fields.countOfBytesExpectedToSend = summary.countOfBytesExpectedToSend
    }
}
