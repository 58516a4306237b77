internal import Glibc
import Foundation
import TransferContainer
import TransferTransport

/// Event delivery (S3): pushes a session's durable events to the process that holds it, in
/// order, each once per holder, and puts the daemon's questions to that holder. Owned by the
/// daemon's loop thread.
final class EventDelivery {
    unowned let daemon: TransferDaemon

    init(daemon: TransferDaemon) {
        self.daemon = daemon
    }

    /// A process took the session: it is sent every event that waits, then the challenges
    /// that wait (an app launched for them answers before it calls its completion handler),
    /// then, once those are answered, word that the backlog is through.
    func deliverBacklog(of session: DaemonSession) {
        pushPendingEvents(session)
        // In task order, so that the app is asked in the order it made them.
        let challenged = session.tasks.values.filter { $0.pendingChallenge != nil }.sorted { $0.taskIdentifier < $1.taskIdentifier }
        for task in challenged { daemon.challenges.askAboutChallenge(task, in: session) }
        session.owesBacklogWord = true
        sayBacklogDeliveredIfSettled(session)
    }

    /// The one place S3.2's rule is kept: `urlSessionDidFinishEvents` comes once, after every
    /// event waiting for the session. Answers to held challenges end tasks (-999, -1202…), so
    /// the word waits until no task is held on a challenge, and follows the events those
    /// answers made. Called after each push of events and each answer.
    func sayBacklogDeliveredIfSettled(_ session: DaemonSession) {
        guard session.owesBacklogWord, session.holder != nil,
              !session.tasks.values.contains(where: { $0.pendingChallenge != nil }) else { return }
        session.owesBacklogWord = false
        push(.backlogDelivered(session: session.key.identifier, through: session.pushedThrough), to: session)
    }

    /// The holder took the events through `through`: they are forgotten once that is durable
    /// (an event not acknowledged is sent again to the next holder).
    func acknowledge(through: UInt64, in session: DaemonSession) throws {
        if daemon.options.freezeOnAcknowledgement { kill(getpid(), SIGSTOP) }
        try session.acknowledge(through: through)
        daemon.log.info("events", "events through \(through) acknowledged", session: session.key.identifier.rawValue)
    }

    /// Sends a push to the session's holder, if any. Progress is never durable: while commits
    /// fail it goes ahead of what waits for the disk.
    func push(_ push: DaemonPush, to session: DaemonSession) {
        guard let holder = session.holder else { return }
        var isProgress = false
        if case .progress = push { isProgress = true }
        if !holder.send(.push(push), overtaking: isProgress && daemon.commits.failure != nil) {
            daemon.log.error("ipc", "\(holder.label) is not reading; disconnecting it", session: session.key.identifier.rawValue)
            daemon.clients.disconnect(holder)
        }
    }

    /// Pushes every event the holder has not been sent yet, in order; without a holder,
    /// lets housekeeping see at once whether the app must be launched.
    func pushPendingEvents(_ session: DaemonSession) {
        guard let holder = session.holder else {
            daemon.requestHousekeeping()
            return
        }
        for event in session.events(after: session.pushedThrough) {
            if let encoded = session.takeEncodedEvent(event.number), let frame = try? encoded.pushFrame(session: session.key.identifier) {
                guard holder.send(frame: frame) else {
                    daemon.log.error("ipc", "\(holder.label) is not reading; disconnecting it", session: session.key.identifier.rawValue)
                    daemon.clients.disconnect(holder)
                    return
                }
            } else {
                push(.event(session: session.key.identifier, event), to: session)
            }
            session.pushedThrough = event.number
        }
        sayBacklogDeliveredIfSettled(session)
    }


    /// Where a question the daemon put to a session's holder about a task stands.
    enum HolderQuestion {
        /// Put just now, to the current holder.
        case asked
        /// Put earlier to the current holder, which may still answer.
        case waiting
        /// Put to the current holder longer than the timeout ago: go on without the answer.
        case overdue
        /// Nobody holds the session: go on without asking.
        case nobodyAttached
    }

    /// Puts `question` to the session's holder about a task, once per holder (a process that
    /// takes the session over is asked again); `asked` records to whom and when. A nil
    /// `timeout` waits for the answer as long as the holder stays.
    func askHolder(_ asked: inout [TaskKey: AskedHolder], _ key: TaskKey, in session: DaemonSession,
                   now: Date, timeout: TimeInterval?, _ question: @autoclosure () -> DaemonPush) -> HolderQuestion {
        guard let holder = session.holder else {
            asked[key] = nil
            return .nobodyAttached
        }
        if let previous = asked[key], previous.holder == ObjectIdentifier(holder) {
            guard let timeout, now.timeIntervalSince(previous.at) >= timeout else { return .waiting }
            asked[key] = nil
            return .overdue
        }
        asked[key] = AskedHolder(holder: ObjectIdentifier(holder), at: now)
        push(question(), to: session)
        return .asked
    }
}

/// A question put to a session's holder about a task: to which connection, and when.
struct AskedHolder {
    var holder: ObjectIdentifier
    var at: Date
}
