import CPOSIX

extension Dictionary where Key == Int, Value == TaskRecord {
    /// Calls `body` with every record, in the dictionary's order, asking the processor for
    /// the fields of the record `distance` places ahead while `body` works on this one. The
    /// daemon's passes over every task (the scheduler's look, resource timeouts, a
    /// `getAllTasks` listing) each waited on memory for every record: its fields lie in their
    /// own allocation, reached in the dictionary's order, not the order they were made in.
    public func forEachRecord(prefetching distance: Int = 8, _ body: (TaskRecord) throws -> Void) rethrows {
        var ahead = values.index(values.startIndex, offsetBy: Swift.min(distance, count))
        for index in values.indices {
            if ahead != values.endIndex {
                values[ahead].prefetchFields()
                values.formIndex(after: &ahead)
            }
            try body(values[index])
        }
    }
}

extension TaskRecord {
    /// Asks the processor to start loading the fields' allocation (`forEachRecord`).
    func prefetchFields() {
        cposix_prefetch(UnsafeRawPointer(Unmanaged.passUnretained(storage).toOpaque()))
    }
}
