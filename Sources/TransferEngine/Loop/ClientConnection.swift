internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// One process connected to the daemon's socket: who the kernel says it is, what it said it
/// is, the sessions it holds, and its bytes in and out. Owned by the event loop.
///
/// A connection speaks for one process: the writer of its first bytes, as the kernel tells
/// with each read (`UnixSocket.receive`). Its hello is believed as far as that process's
/// executable goes, and bytes written by any other process (a child that kept the socket
/// across a fork) end the connection. Until a hello is verified, frames are small
/// (`Frame.maximumUnidentifiedSize`) and the bytes all such connections hold are capped
/// (`InputAccount`); after it, frames may be `Frame.maximumSize` and what identified peers
/// hold beyond a small allowance each is capped too. An unfinished frame that does not
/// complete within `frameDeadline` ends the connection. A peer that does not read is cut off
/// past `outboxLimit`, counting what waits beyond the answer to its last request.
final class ClientConnection {
    let id: Int
    let descriptor: FileDescriptor
    /// The process that connected (`SO_PEERCRED`): checked for the uid; not who speaks.
    let credentials: UnixSocket.PeerCredentials?
    /// Set once the hello is verified (`RequestHandler.welcome`).
    var hello: ClientHello? {
        didSet { if hello != nil { identified() } }
    }
    let acceptedAt: Date
    /// Sessions this client has open (attached), by identifier.
    var attachedSessions: Set<SessionKey> = []
    /// Asked to watch (`DaemonRequest.watch`): pushed the running tasks until it closes.
    var isWatching = false
    /// When a watcher was last found with its previous push still unsent (see `Watchers.send(_:toWatcher:)`).
    var watcherBehindSince: Date?
    /// A read is scheduled for the next turn (frames wait in the buffer).
    var readAgainScheduled = false
    /// The process the connection speaks for: the writer of its first bytes, with a handle on
    /// it (a pidfd) until its hello is verified.
    private(set) var writer: UnixSocket.Writer?
    private var decoder = FrameDecoder(limit: Frame.maximumUnidentifiedSize)
    /// Bytes held for this connection that count against `account`.
    private var accountedBytes = 0
    /// What this peer's unfinished requests count against: the unidentified peers' account
    /// until its hello is verified, then the identified peers'.
    private var account: InputAccount
    private let identifiedAccount: InputAccount
    /// Since when the frame being received has been incomplete (nil: none is).
    private(set) var incompleteSince: Date?
    /// When the peer's last whole request arrived (or the connection was accepted).
    private(set) var lastRequestAt: Date?
    /// Queued frames, back to back, written from `outboxHead` on: one send per turn carries
    /// every reply and push of that turn.
    private var outbox: [UInt8] = []
    private var outboxHead = 0
    /// Output leaves only once the changes it tells of are on disk: up to `releasedEnd` it
    /// may be sent; up to `coveredEnd` it waits for the commit under way; past that, for the
    /// next commit.
    private var releasedEnd = 0
    private var coveredEnd = 0
    /// Up to here the outbox holds answers admitted whole (`beginAnswer`): a big answer, such
    /// as a session of 100,000 tasks opened, is not held against the limit; what follows it is.
    private var answerEnd = 0
    /// Between `beginAnswer` and `endAnswer`: whether the peer had read enough for the
    /// answer to be queued whole (nil: no answer is being queued).
    private var answerAdmitted: Bool?
    var outboxBytes: Int { outbox.count - outboxHead }
    /// Queued output counted against the limit: what waits beyond the last whole answer.
    var countedOutboxBytes: Int { outbox.count - max(outboxHead, answerEnd) }
    private(set) var isClosed = false

    /// A session holder that stops reading is cut off past this much queued output.
    static let outboxLimit = 64 << 20
    /// The same for a watcher (it is never sent a push while its last one waits, see
    /// `Watchers.send(_:toWatcher:)`, so this is one push of a very long list of tasks)…
    static let watcherOutboxLimit = 4 << 20
    /// …and for a peer that has not said who it is (pings, refusals).
    static let unidentifiedOutboxLimit = 64 << 10

    /// At most this many frames, and bytes read, per connection per turn of the loop: the rest
    /// waits for the next turn, so that one busy peer cannot starve the others or the transfers.
    static let framesPerTurn = 64
    static let bytesPerTurn = 256 << 10

    /// A frame begun must be complete within this long: a peer that trickles is cut off.
    static let frameDeadline: TimeInterval = 10

    init(id: Int, descriptor: FileDescriptor, account: InputAccount = InputAccount(), identifiedAccount: InputAccount = .identified(), acceptedAt: Date = Date()) {
        self.acceptedAt = acceptedAt
        self.id = id
        self.descriptor = descriptor
        self.account = account
        self.identifiedAccount = identifiedAccount
        self.credentials = UnixSocket.peerCredentials(descriptor)
        // Normally inherited from the listener; a socket made otherwise (a socketpair) gets it here.
        try? UnixSocket.identifyWriters(descriptor, handles: true)
    }

    /// The process the connection speaks for (the writer of its bytes), or before it wrote
    /// anything the one that connected.
    var pid: Int32? { writer?.pid ?? credentials?.pid }
    var label: String {
        let who = hello.map { $0.identity.bundleIdentifier.rawValue } ?? "unidentified"
        return "\(who)[\(pid.map(String.init) ?? "?")]"
    }

    /// The queued output past which this peer is cut off.
    var outboxLimit: Int {
        if hello == nil { return Self.unidentifiedOutboxLimit }
        if isWatching && attachedSessions.isEmpty { return Self.watcherOutboxLimit }
        return Self.outboxLimit
    }

    /// What reading produced.
    enum Input {
        case frame(Data)
        /// Nothing more for now: the socket is empty (`more` false), or this turn's share is
        /// used up (`more` true: read again next turn).
        case idle(more: Bool)
        /// The peer hung up (possibly mid-frame) or sent something that cannot be framed.
        case closed(reason: String?)
        /// A frame larger than the daemon takes, or past what peers may hold together: the
        /// peer is told why (-1103) and the connection closed.
        case refused(TransferFailure)
        /// Bytes written by a process other than the one the connection speaks for, or whose
        /// writer the kernel did not name.
        case foreignWriter(String)
    }

    /// The next frame the peer sent, reading (without blocking) at most `budget` more bytes
    /// from the socket for it; `scratch` is the reader's buffer.
    func nextInput(budget: inout Int, scratch: UnsafeMutableRawBufferPointer, now: Date = Date()) -> Input {
        while true {
            do {
                let frame = try decoder.next()
                _ = updateAccount() // it only shrinks here
                if let frame {
                    incompleteSince = decoder.pendingByteCount > 0 ? now : nil
                    lastRequestAt = now
                    return .frame(frame)
                }
            } catch {
                return .refused(TransferFailure(code: TransferFailure.dataLengthExceedsMaximum, message: "\(error)"))
            }
            guard budget > 0 else { return .idle(more: true) }
            let received: UnixSocket.Received
            do {
                received = try UnixSocket.receive(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: scratch[0..<min(scratch.count, budget)]))
            } catch {
                if error.code == EAGAIN || error.code == EWOULDBLOCK { return .idle(more: false) }
                // A client that exits with pushes it never read resets the connection: the usual
                // end of a short-lived process, not an error, unless it was in the middle of a request.
                if error.code == ECONNRESET {
                    return .closed(reason: decoder.pendingByteCount > 0 ? "reset mid-frame (\(decoder.pendingByteCount) bytes pending)" : nil)
                }
                return .closed(reason: error.description)
            }
            if received.byteCount == 0 {
                received.writer?.process?.close()
                return .closed(reason: decoder.pendingByteCount > 0 ? "disconnected mid-frame (\(decoder.pendingByteCount) bytes pending)" : nil)
            }
            guard let from = received.writer else {
                return .foreignWriter("\(received.byteCount) bytes whose writer the kernel did not name")
            }
            if let writer {
                from.process?.close()
                guard from.pid == writer.pid else {
                    return .foreignWriter("process \(from.pid) wrote on the connection of process \(writer.pid)\(hello.map { " (\($0.identity.bundleIdentifier))" } ?? "")")
                }
            } else {
                writer = from
            }
            budget -= received.byteCount
            if decoder.pendingByteCount == 0 { incompleteSince = now }
            decoder.append(UnsafeRawBufferPointer(rebasing: scratch[0..<received.byteCount]))
            guard updateAccount() else {
                let who = hello == nil ? "peers that have not said who they are" : "peers"
                return .refused(TransferFailure(code: TransferFailure.dataLengthExceedsMaximum,
                                                message: "\(who) hold \(account.bytes) bytes of unfinished requests, the most the daemon holds (\(account.limit)); closing this connection (it holds \(decoder.pendingByteCount))"))
            }
        }
    }

    /// Whether this identified connection holds nothing the daemon owes it or it is doing
    /// (a session, a watch, a reply not yet sent, a request begun) and sent nothing since `cutoff`.
    func holdsNothing(since cutoff: Date) -> Bool {
        hello != nil && attachedSessions.isEmpty && !isWatching && outboxBytes == 0 && incompleteSince == nil
            && (lastRequestAt ?? acceptedAt) < cutoff
    }

    /// Whether bytes beyond the frames already taken wait: in this connection's buffer, or in the kernel's.
    var hasUnreadInput: Bool {
        decoder.pendingByteCount > 0 || UnixSocket.pendingInputCount(descriptor) > 0
    }

    /// The hello was verified: frames may be full size, and the bytes no longer count as
    /// unidentified; the writer's handle has served.
    private func identified() {
        decoder.limit = Frame.maximumSize
        account.release(accountedBytes)
        accountedBytes = 0
        account = identifiedAccount
        _ = updateAccount() // a verified hello leaves nothing unread (see `RequestHandler.welcome`)
        writer?.process?.close()
        writer?.process = nil
        try? UnixSocket.identifyWriters(descriptor, handles: false) // credentials still, no more pidfds
    }

    /// Counts what the peer holds now beyond its allowance; false when that is past the cap.
    private func updateAccount() -> Bool {
        let pending = max(0, decoder.pendingByteCount - account.allowancePerConnection)
        if pending > accountedBytes {
            guard account.admit(pending - accountedBytes) else { return false }
        } else {
            account.release(accountedBytes - pending)
        }
        accountedBytes = pending
        return true
    }

    /// Queues a frame; returns false if the client is too far behind (it will be dropped).
    /// It is written once released: after the daemon has committed what it tells of. With
    /// `overtaking` (a frame that tells of no change, while commits fail) it is released at
    /// once, ahead of the output that waits for the disk: replies are matched by number, and
    /// a full disk must not silence pings, listings and progress.
    @discardableResult
    func send(_ frame: DaemonFrame, overtaking: Bool = false) -> Bool {
        guard let data = try? Frame.encode(frame, limit: Frame.maximumReplySize) else { return false }
        return send(frame: data, overtaking: overtaking)
    }

    /// Queues a frame already encoded, as `send(_:overtaking:)` does.
    @discardableResult
    func send(frame data: Data, overtaking: Bool = false) -> Bool {
        // An answer admitted goes whole; one to a peer already behind counts all it has not
        // read; a push between answers counts what waits beyond the last answer.
        let counted = switch answerAdmitted {
        case true?: 0
        case false?: outboxBytes
        case nil: countedOutboxBytes
        }
        guard !isClosed, counted + data.count <= outboxLimit || answerAdmitted == true else { return false }
        let position: Int
        if overtaking && releasedEnd < outbox.count {
            // `releasedEnd` lies between two frames: everything before it may go, nothing after.
            position = releasedEnd
            outbox.insert(contentsOf: data, at: releasedEnd)
            releasedEnd += data.count
            coveredEnd += data.count
        } else {
            position = outbox.count
            outbox.append(contentsOf: data)
            if overtaking { releaseAll() }
        }
        if position < answerEnd { answerEnd += data.count }
        if answerAdmitted == true { answerEnd = max(answerEnd, position + data.count) }
        return true
    }

    /// What is queued from here until `endAnswer` answers one request (the reply, and what
    /// follows it, as a session's backlog after `openSession`): it is queued whole, however
    /// large, if the peer has read what it was sent before, to within the limit. So the bound
    /// applies to a peer that does not read, not to a big answer; a peer that asks again
    /// without reading is held to the limit and one answer.
    func beginAnswer() {
        answerAdmitted = outboxBytes <= outboxLimit
    }

    func endAnswer() {
        answerAdmitted = nil
    }

    /// Queued output that may be sent now.
    var hasReleasedOutput: Bool { outboxHead < releasedEnd }

    /// The output queued so far waits for the commit just started (or under way, when
    /// nothing has changed since it started).
    func coverByCommit() {
        coveredEnd = outbox.count
    }

    /// The commit under way is on disk: the output it covers may go.
    func releaseCovered() {
        releasedEnd = coveredEnd
    }

    /// Nothing waits for the disk: all queued output may go.
    func releaseAll() {
        coveredEnd = outbox.count
        releasedEnd = outbox.count
    }

    /// Writes as much released output as the socket takes now.
    func flush() {
        while outboxHead < releasedEnd {
            let n = outbox.withUnsafeBytes { raw in
                Glibc.send(descriptor.rawValue, raw.baseAddress! + outboxHead, releasedEnd - outboxHead, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n < 0 {
                if errno == EINTR { continue }
                break // EAGAIN: wait for POLLOUT; other errors surface as a hangup on read.
            }
            outboxHead += n
        }
        if outboxHead == outbox.count {
            outbox.removeAll(keepingCapacity: outbox.count <= 1 << 20)
            (outboxHead, releasedEnd, coveredEnd, answerEnd) = (0, 0, 0, 0)
        } else if outboxHead >= 1 << 20 {
            outbox.removeSubrange(0..<outboxHead)
            (releasedEnd, coveredEnd) = (releasedEnd - outboxHead, coveredEnd - outboxHead)
            answerEnd = max(0, answerEnd - outboxHead)
            outboxHead = 0
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        account.release(accountedBytes)
        accountedBytes = 0
        writer?.process?.close()
        writer?.process = nil
        descriptor.close()
    }
}
