#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX
import TransferTransport

/// Event delivery built on its own (S3.2, S3.4): no daemon and no loop. What it asks of the
/// rest of the daemon goes to a stub that records it; the holder is a connection over a
/// socket pair whose other end the test reads as the client would; the only files are the
/// session's own folder.
@Suite final class EventDeliveryAloneTests {
    /// Records what event delivery asks of the rest of the daemon.
    final class RecordingSurroundings: DeliverySurroundings {
        var commitsFailing = false
        var disconnected: [ObjectIdentifier] = []
        var housekeepingRequests = 0
        var challengesAsked: [Int] = []

        func disconnectHolder(_ holder: ClientConnection) { disconnected.append(ObjectIdentifier(holder)) }
        func requestHousekeeping() { housekeepingRequests += 1 }
        func askAboutChallenge(_ task: TaskRecord, in session: DaemonSession) { challengesAsked.append(task.taskIdentifier) }
    }

    /// What the client reads: an event by its number, or the word that the backlog is through.
    enum Pushed: Equatable {
        case event(UInt64)
        case backlogDelivered(through: UInt64)
    }

    /// The container of the test's own and its one session; removed with the test.
    let container: SessionFixture
    var session: DaemonSession { container.session }
    let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    let surroundings = RecordingSurroundings()
    let delivery: EventDelivery
    let holder: ClientConnection
    let peer: FileDescriptor
    /// Keeps a frame cut between two reads.
    var decoder = FrameDecoder()

    init() throws {
        container = try SessionFixture("event-delivery")
        delivery = EventDelivery(surroundings: surroundings, log: container.log)
        let family = container.session.key.family
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw Errno.current("socketpair") }
        holder = ClientConnection(id: 1, descriptor: FileDescriptor(rawValue: fds[0]))
        peer = FileDescriptor(rawValue: fds[1])
        holder.hello = ClientHello(identity: AppIdentity(bundleIdentifier: family, kind: .app, containingApp: family, containingAppExecutable: "host-app", appGroups: []),
                                   executablePath: "/host-app", processName: "host-app", isForeground: false)
    }

    deinit {
        holder.close()
        peer.close()
    }

    /// Ends a new download task with an error: one event in the session.
    @discardableResult
    private func endTask(challenged: Bool = false) throws -> TaskRecord {
        var task = try session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/file")), inBackground: true, pendingFailure: nil, at: clock.now)
        if challenged {
            task.pendingChallenge = ChallengeRecord(protectionSpace: ProtectionSpaceRecord(host: "127.0.0.1", port: 9, protocol: "http", realm: "vault", method: .basic, isProxy: false),
                                                    previousFailureCount: 0, proposedUser: nil)
            session.update(task)
            return task
        }
        _ = try session.complete(task, downloadedFile: nil, error: TransferFailure(code: TransferFailure.cannotConnectToHost, message: "refused"), at: clock.now)
        return task
    }

    /// What the client can read now, without waiting, once the holder's output may go (as
    /// the group commit lets it go when nothing waits for the disk).
    private func received() throws -> [Pushed] {
        holder.releaseAll()
        holder.flush()
        return try readableFrames(from: peer, decoder: &decoder).compactMap { frame in
            switch frame {
            case .push(.event(_, let event)): .event(event.number)
            case .push(.backlogDelivered(_, let through)): .backlogDelivered(through: through)
            default: nil
            }
        }
    }

    @Test("A process that takes the session is sent every waiting event in order, then once the word that the backlog is through; a later event is sent alone, and nothing twice")
    func backlogInOrderThenTheWordOnce() throws {
        for _ in 0..<3 { try endTask() }
        session.holder = holder
        delivery.deliverBacklog(of: session)
        #expect(try received() == [.event(1), .event(2), .event(3), .backlogDelivered(through: 3)])
        try endTask()
        delivery.pushPendingEvents(session)
        #expect(try received() == [.event(4)])
        #expect(surroundings.housekeepingRequests == 0 && surroundings.disconnected.isEmpty)
    }

    @Test("An event with nobody holding the session asks for housekeeping at once, so that the app is launched for it without waiting for the periodic look")
    func nobodyAttachedAsksForHousekeeping() throws {
        try endTask()
        delivery.pushPendingEvents(session)
        #expect(surroundings.housekeepingRequests == 1)
        #expect(session.pushedThrough == 0, "nothing was sent: the next holder gets the event")
    }

    @Test("A challenge waiting when a process takes the session is put to it, and the word that the backlog is through waits until the challenge is answered")
    func backlogWordWaitsForChallenges() throws {
        try endTask()
        var challenged = try endTask(challenged: true)
        session.holder = holder
        delivery.deliverBacklog(of: session)
        #expect(surroundings.challengesAsked == [challenged.taskIdentifier])
        #expect(try received() == [.event(1)], "urlSessionDidFinishEvents would come before the app answered")
        challenged.pendingChallenge = nil // answered: the task goes on
        session.update(challenged)
        delivery.sayBacklogDeliveredIfSettled(session)
        #expect(try received() == [.backlogDelivered(through: 1)])
    }

    @Test("A holder launched for events hears, after its word, each later batch end with a word of its own once no challenge waits (S3.2); one the user launched hears no word a push (above)")
    func laterBatchesOfALaunchedHolder() throws {
        var challenged = try endTask(challenged: true)
        session.holder = holder
        session.holderLaunchedForEvents = true
        delivery.deliverBacklog(of: session)
        #expect(try received().isEmpty, "the word waits for the answer")
        challenged.pendingChallenge = nil // accepted: the transfer goes on, and ends after the word
        session.update(challenged)
        delivery.sayBacklogDeliveredIfSettled(session)
        #expect(try received() == [.backlogDelivered(through: 0)])

        try endTask()
        try endTask()
        delivery.pushPendingEvents(session)
        #expect(try received() == [.event(1), .event(2), .backlogDelivered(through: 2)], "a new batch, and its word")
        var asking = try endTask(challenged: true)
        try endTask()
        delivery.pushPendingEvents(session)
        #expect(try received() == [.event(3)], "a challenge waits: the word waits for its answer")
        asking.pendingChallenge = nil
        session.update(asking)
        delivery.sayBacklogDeliveredIfSettled(session)
        #expect(try received() == [.backlogDelivered(through: 3)])
        delivery.sayBacklogDeliveredIfSettled(session)
        #expect(try received().isEmpty, "once a batch")
    }

    @Test("A holder too far behind in reading is cut off, and the event it was not sent waits for the next holder")
    func holderNotReadingIsCutOff() throws {
        session.holder = holder
        #expect(holder.send(frame: Data(count: ClientConnection.outboxLimit)), "output the holder has not read, up to the limit")
        try endTask()
        delivery.pushPendingEvents(session)
        #expect(surroundings.disconnected == [ObjectIdentifier(holder)])
        #expect(session.pushedThrough == 0)
    }
}
