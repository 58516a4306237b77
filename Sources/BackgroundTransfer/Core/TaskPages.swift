import TransferContainer

extension DaemonConnection {
    /// The records of the tasks a session's open reply only named (`DaemonReply.sessionOpened`'s
    /// `moreTasks`), asked for a page at a time: each page is a request with its own timeout, so
    /// a session of any size opens. Tasks that ended meanwhile are left out (their events
    /// follow). Called on the thread that opens the session.
    func taskRecords(_ identifiers: [Int], of session: SessionIdentifier) throws(TransferFailure) -> [TaskRecord] {
        var records: [TaskRecord] = []
        var start = 0
        while start < identifiers.count {
            var page = Array(identifiers[start..<min(identifiers.count, start + DaemonReply.tasksPerPage)])
            start += page.count
            // A reply holds a page's worth of bytes (DaemonReply.pageLength): the rest of the
            // identifiers asked for, after the last record, are asked for again.
            while !page.isEmpty {
                guard case .tasks(let more) = try request(.getTasks(session: session, identifiers: page)) else {
                    throw TransferFailure(code: TransferFailure.badServerResponse,
                                          message: "the transfer daemon did not answer a page of session "
                                            + "\(session)'s tasks with task records",
                                          subject: session.rawValue)
                }
                records += more
                // None left unfinished, or a record not asked for: no page can follow.
                guard let last = more.last?.taskIdentifier, let index = page.firstIndex(of: last) else { break }
                page.removeFirst(index + 1)
            }
        }
        return records
    }
}
