import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

extension RequestHandler {
    /// A task made in a session the requester holds (S2): refused at once when it cannot be
    /// recorded (the app's quota, a full disk, a giant request); created, to fail when resumed,
    /// when a background session cannot carry it out (S2.1, S2.3). Answered with the record,
    /// or `.ok` when the client built that very record itself.
    func createTask(_ creation: TaskCreation, in session: DaemonSession, by hello: ClientHello) throws -> DaemonReply {
        let identifier = session.key.identifier
        guard !session.invalidateWhenDone else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "Attempted to create a task in a session that has been invalidated", subject: identifier.rawValue)
        }
        if let resent = creation.taskIdentifier.flatMap(session.taskOrEnding) { return .task(resent) } // sent again after a reconnect
        // Refused before any record is made, so a giant URL is not kept (in memory or on disk).
        if let oversized = TransferLimits.refusal(of: creation.request) ?? creation.requestBody.flatMap({ TransferLimits.refusal(ofBodyBytes: $0.count, url: creation.request.url) }) { throw oversized }
        try quotas.admitTask(of: session.record.owner, in: session)
        try byteBudget.admit(HeldBytes.of(creation), of: session.record.owner, in: session)
        let journal = JournalContents.path(inSession: session.directory)
        if let failure = commits.failure { throw JournalReserve.cannotRecord(failure, writing: journal) }
        // A new task leaves the reserve to the lines that end the tasks already accepted.
        let reserve = JournalReserve(reserve: freeSpaceReserve)
        if let full = reserve.refusalOfNewTask(available: JournalReserve.availableSpace(at: session.directory.path), journal: journal) { throw full }
        var refusal = creation.resumeData == nil ? refusal(of: creation) : nil
        var task = try session.createTask(creation, inBackground: !hello.isForeground, pendingFailure: refusal, at: clock.now)
        if !hello.isForeground {
            // Work started in the background is discretionary, and waits out the rate limiter (S5, S6.5).
            task.requirements.isDiscretionary = true
            task.rateLimitedUntil = relauncher.rateLimitedStart(for: hello.identity)
            session.update(task)
        }
        if let blob = creation.resumeData {
            // The resume data says what to transfer; it is checked first, then its URL.
            refusal = resumeData.adoptResumeData(blob, into: &task, in: session, for: hello.identity)
                ?? self.refusal(of: TaskCreation(kind: task.kind, request: task.originalRequest))
            task.pendingFailure = refusal
            session.update(task)
        } else if task.kind == .upload && refusal == nil {
            refusal = surroundings.takeUploadBody(creation.uploadFile, into: &task, in: session, for: hello.identity)
            task.pendingFailure = refusal
            session.update(task)
        } else if let body = creation.requestBody, task.requestBodyLength != nil, refusal == nil,
                  let failure = surroundings.keepRequestBody(body, of: task, in: session) {
            refusal = failure
            task.pendingFailure = failure
            session.update(task)
        }
        log.info("tasks", "created \(task.kind.rawValue) task \(task.taskIdentifier) for \(task.originalRequest.url)", session: identifier.rawValue, task: task.taskIdentifier)
        if let refusal { log.error("tasks", "task will fail when resumed: \(refusal.message)", session: identifier.rawValue, task: task.taskIdentifier) }
        // A client that chose the identifier built this very record itself, unless the
        // daemon has changed it since (resume data, an upload's body, background rules).
        let stored = session.tasks[task.taskIdentifier] ?? task
        return creation.taskIdentifier != nil && stored.revision == 0 ? .ok : .task(stored)
    }
}
