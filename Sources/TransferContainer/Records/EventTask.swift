/// The task as its completion event carries it: an event waits, in the daemon's memory and its
/// journal, until the app acknowledges it, which a hostile app never does; so it carries what
/// the delegate is told of the ended task, not every byte the task held. Plain values, any thread.
extension TaskRecord {
    /// Header bytes (names and values) of a request an event keeps; a request with more keeps
    /// its URL and method only, and the event says so (`EventRecord.requestHeadersLeftOut`):
    /// the holder that made the task still has them, and keeps its own.
    public static let eventRequestHeaderBytes = 8 << 10

    /// This task, ended, as its event carries it: without a pending challenge (nothing waits
    /// for an answer any more) and, for requests past `eventRequestHeaderBytes`, without their
    /// header fields. `leftOut`: header fields were dropped.
    public func forEvent() -> (task: TaskRecord, leftOut: Bool) {
        var task = self
        task.state = .completed
        task.pendingChallenge = nil
        var leftOut = false
        func trimmed(_ request: RequestRecord) -> RequestRecord {
            let bytes = request.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
            guard bytes > Self.eventRequestHeaderBytes else { return request }
            leftOut = true
            return RequestRecord(url: request.url, httpMethod: request.httpMethod,
                                 timeoutInterval: request.timeoutInterval)
        }
        task.originalRequest = trimmed(task.originalRequest)
        if let replacement = task.replacementRequest { task.replacementRequest = trimmed(replacement) }
        return (task, leftOut)
    }
}
