internal import Glibc
import Foundation
import TransferContainer
import TransferTransport
import TransferLogging

/// What event delivery sees of the rest of the daemon. `TransferDaemon` answers, on the loop thread.
protocol DeliverySurroundings: AnyObject {
    /// Whether the last commit failed (`GroupCommit.failure`): progress then goes ahead of
    /// the output that waits for the disk.
    var commitsFailing: Bool { get }
    /// Cuts off a holder that does not read what it is sent (`ClientServer.disconnect`).
    func disconnectHolder(_ holder: ClientConnection)
    /// Housekeeping at the end of this turn: events wait with nobody attached, so the app
    /// may have to be launched for them at once.
    func requestHousekeeping()
    /// Puts the challenge a task waits on to the session's new holder (`Challenges`).
    func askAboutChallenge(_ task: TaskRecord, in session: DaemonSession)
}

/// Event delivery (S3): pushes a session's durable events to the process that holds it, in
/// order, each once per holder, and puts the daemon's questions to that holder. Owned by the
/// daemon's loop thread.
final class EventDelivery {
    private unowned let surroundings: any DeliverySurroundings
    private let log: TransferLog
    /// A testing aid (`TransferDaemon.Options.freezeOnAcknowledgement`).
    private let freezeOnAcknowledgement: Bool

    init(surroundings: any DeliverySurroundings, log: TransferLog, freezeOnAcknowledgement: Bool = false) {
        self.surroundings = surroundings
        self.log = log
        self.freezeOnAcknowledgement = freezeOnAcknowledgement
    }

    /// A process took the session: it is sent every event that waits, then the challenges
    /// that wait (an app launched for them answers before it calls its completion handler),
    /// then, once those are answered, word that the backlog is through.
    func deliverBacklog(of session: DaemonSession) {
        pushPendingEvents(session)
        // In task order, so that the app is asked in the order it made them.
        let challenged = session.tasks.values.filter { $0.pendingChallenge != nil }.sorted { $0.taskIdentifier < $1.taskIdentifier }
        for task in challenged { surroundings.askAboutChallenge(task, in: session) }
        session.owesBacklogWord = true
        sayBacklogDeliveredIfSettled(session)
    }

    /// The one place S3.2's rule is kept: `urlSessionDidFinishEvents` comes once a batch, after
    /// every event of it. Answers to held challenges end tasks (-999, -1202…), so the word
    /// waits until no task is held on a challenge, and follows the events those answers made.
    /// Transfers an answer let go on end after the word: their events form a new batch
    /// (`pushPendingEvents`). Called after each push of events and each answer.
    func sayBacklogDeliveredIfSettled(_ session: DaemonSession) {
        guard session.owesBacklogWord, session.holder != nil,
              !session.tasks.values.contains(where: { $0.pendingChallenge != nil }) else { return }
        session.owesBacklogWord = false
        session.holderHeardBacklogWord = true
        push(.backlogDelivered(session: session.key.identifier, through: session.pushedThrough), to: session)
    }

    /// The holder took the events through `through`: they are forgotten once that is durable
    /// (an event not acknowledged is sent again to the next holder).
    func acknowledge(through: UInt64, in session: DaemonSession) throws {
        if freezeOnAcknowledgement { kill(getpid(), SIGSTOP) }
        try session.acknowledge(through: through)
        log.info("events", "events through \(through) acknowledged", session: session.key.identifier.rawValue)
    }

    /// Sends a push to the session's holder, if any. Progress is never durable: while commits
    /// fail it goes ahead of what waits for the disk.
    func push(_ push: DaemonPush, to session: DaemonSession) {
        guard let holder = session.holder else { return }
        var isProgress = false
        if case .progress = push { isProgress = true }
        if !holder.send(.push(push), overtaking: isProgress && surroundings.commitsFailing) {
            log.error("ipc", "\(holder.label) is not reading; disconnecting it", session: session.key.identifier.rawValue)
            surroundings.disconnectHolder(holder)
        }
    }

    /// Pushes every event the holder has not been sent yet, in order; without a holder,
    /// lets housekeeping see at once whether the app must be launched.
    func pushPendingEvents(_ session: DaemonSession) {
        guard let holder = session.holder else {
            surroundings.requestHousekeeping()
            return
        }
        let pending = session.events(after: session.pushedThrough)
        // After its word, a holder launched for events takes them as a new batch, with a word of
        // its own (S3.2); a process the user launched hears no word a push (one a small file).
        if !pending.isEmpty && session.holderLaunchedForEvents && session.holderHeardBacklogWord {
            session.owesBacklogWord = true
        }
        for event in pending {
            if let encoded = session.takeEncodedEvent(event.number), let frame = try? encoded.pushFrame(session: session.key.identifier) {
                guard holder.send(frame: frame) else {
                    log.error("ipc", "\(holder.label) is not reading; disconnecting it", session: session.key.identifier.rawValue)
                    surroundings.disconnectHolder(holder)
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
