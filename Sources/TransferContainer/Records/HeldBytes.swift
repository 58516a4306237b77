import Foundation

/// What a record costs the daemon in memory, as its per-app byte budget counts it
/// (`TransferLimits.bytesPerApp`): the bytes of its variable fields plus a fixed share for
/// the record itself. An estimate, the same on both sides of the wire (a client or test can
/// work out what a task will count). Plain values, any thread.
public enum HeldBytes {
    /// A task record's fixed share: its fields, its slot in the session's tables and its
    /// share of the journal's bookkeeping, rounded up.
    public static let perRecord = 768
    /// One header field's share beyond its name and value (its array slot, two strings).
    public static let perHeaderField = 32

    public static func of(_ request: RequestRecord) -> Int {
        request.url.utf8.count + request.httpMethod.utf8.count
            + request.headers.reduce(0) { $0 + perHeaderField + $1.name.utf8.count + $1.value.utf8.count }
    }

    /// What a task made from `creation` will count: what `of(_: TaskRecord)` gives for it.
    public static func of(_ creation: TaskCreation) -> Int {
        perRecord + of(creation.request) + (creation.taskDescription?.utf8.count ?? 0)
            + (creation.uploadFile?.utf8.count ?? 0)
    }

    public static func of(_ task: TaskRecord) -> Int {
        var bytes = perRecord + of(task.originalRequest)
        bytes += task.replacementRequest.map(of) ?? 0
        bytes += (task.taskDescription?.utf8.count ?? 0) + (task.uploadFile?.utf8.count ?? 0)
        bytes += (task.currentURL?.utf8.count ?? 0) + (task.lastError?.utf8.count ?? 0)
        bytes += task.response.map { response in
            response.url.utf8.count
                + response.headers.reduce(0) { $0 + perHeaderField + $1.key.utf8.count + $1.value.utf8.count }
        } ?? 0
        bytes += task.pendingChallenge.map(of) ?? 0
        bytes += task.pendingFailure.map(of) ?? 0
        return bytes
    }

    public static func of(_ event: EventRecord) -> Int {
        of(event.task) + (event.downloadedFile?.utf8.count ?? 0) + (event.responseBody?.count ?? 0)
            + (event.error.map(of) ?? 0)
    }

    public static func of(_ failure: TransferFailure) -> Int {
        failure.message.utf8.count + (failure.subject?.utf8.count ?? 0) + (failure.failingURL?.utf8.count ?? 0)
            + (failure.resumeData?.count ?? 0) + (failure.serverTrust.map(of) ?? 0)
    }

    public static func of(_ challenge: ChallengeRecord) -> Int {
        challenge.protectionSpace.host.utf8.count + (challenge.protectionSpace.realm?.utf8.count ?? 0)
            + (challenge.proposedUser?.utf8.count ?? 0) + (challenge.serverTrust.map(of) ?? 0)
    }

    public static func of(_ trust: ServerTrustRecord) -> Int {
        trust.host.utf8.count + (trust.failureReason?.utf8.count ?? 0) + trust.certificates.reduce(0) { $0 + $1.count }
    }
}
