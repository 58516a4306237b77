/// How many task records one reply carries (`DaemonReply.sessionOpened`, `.tasks`): at most
/// `DaemonReply.tasksPerPage` records and `DaemonReply.bytesPerPage` bytes of them (as
/// `HeldBytes` counts them), so that a session of large records (giant headers, challenges
/// with long chains) opens in pieces a client reads within its limits, as one of many small
/// ones does. A page holds its first record whatever its size, so that every page moves on.
extension DaemonReply {
    /// Bytes of task records per page: a page is encoded at about this size, well within the
    /// daemon's outbox for a holder (64 MiB) and a request's timeout, and 10,000 records of
    /// ordinary size still fit one page.
    public static let bytesPerPage = 16 << 20

    /// How many of `records`, from the first, one page carries.
    public static func pageLength(of records: some Sequence<TaskRecord>) -> Int {
        var count = 0
        var bytes = 0
        for record in records {
            guard count < tasksPerPage else { break }
            bytes += HeldBytes.of(record)
            if count > 0 && bytes > bytesPerPage { break }
            count += 1
        }
        return count
    }
}
