internal import Glibc
import Foundation
import TransferContainer

/// One process connected to the daemon's socket: its kernel credentials, what it said it
/// is, the sessions it holds, and its bytes in and out. Owned by the event loop.
final class ClientConnection {
    let id: Int
    let descriptor: FileDescriptor
    let credentials: UnixSocket.PeerCredentials?
    var hello: ClientHello?
    let acceptedAt = Date()
    /// Sessions this client has open (attached), by identifier.
    var attachedSessions: Set<SessionKey> = []
    /// Asked to watch (`DaemonRequest.watch`): pushed the running tasks until it closes.
    var isWatching = false
    private var decoder = FrameDecoder()
    /// Queued frames, back to back, written from `outboxHead` on: one send per turn carries
    /// every reply and push of that turn.
    private var outbox: [UInt8] = []
    private var outboxHead = 0
    /// Output leaves only once the changes it tells of are on disk: up to `releasedEnd` it
    /// may be sent; up to `coveredEnd` it waits for the commit under way; past that, for the
    /// next commit.
    private var releasedEnd = 0
    private var coveredEnd = 0
    var outboxBytes: Int { outbox.count - outboxHead }
    private(set) var isClosed = false

    /// A client that stops reading is cut off past this much queued output.
    static let outboxLimit = 64 << 20

    init(id: Int, descriptor: FileDescriptor) {
        self.id = id
        self.descriptor = descriptor
        self.credentials = UnixSocket.peerCredentials(descriptor)
    }

    var pid: Int32? { credentials?.pid }
    var label: String {
        let who = hello.map { $0.identity.bundleIdentifier.rawValue } ?? "unidentified"
        return "\(who)[\(pid.map(String.init) ?? "?")]"
    }

    /// What reading produced.
    enum Input {
        case frames([Data])
        /// The peer hung up (possibly mid-frame) or sent something that cannot be framed.
        case closed(reason: String?)
    }

    /// Reads everything available without blocking and cuts it into frames.
    func readAvailable() -> Input {
        var frames: [Data] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(descriptor.rawValue, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                do {
                    while let frame = try decoder.next() { frames.append(frame) }
                } catch {
                    return .closed(reason: "\(error)")
                }
                continue
            }
            if n == 0 {
                let partial = decoder.pendingByteCount > 0 ? "disconnected mid-frame (\(decoder.pendingByteCount) bytes pending)" : nil
                return frames.isEmpty ? .closed(reason: partial) : .frames(frames)
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .frames(frames) }
            return .closed(reason: Errno.current("recv").description)
        }
    }

    /// Queues a frame; returns false if the client is too far behind (it will be dropped).
    /// It is written once released: after the daemon has committed what it tells of.
    @discardableResult
    func send(_ frame: DaemonFrame) -> Bool {
        guard let data = try? Frame.encode(frame, limit: Frame.maximumReplySize) else { return false }
        return send(frame: data)
    }

    /// Queues a frame already encoded, as `send(_:)` does.
    @discardableResult
    func send(frame data: Data) -> Bool {
        guard !isClosed, outboxBytes + data.count <= Self.outboxLimit else { return false }
        outbox.append(contentsOf: data)
        return true
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
            (outboxHead, releasedEnd, coveredEnd) = (0, 0, 0)
        } else if outboxHead >= 1 << 20 {
            outbox.removeSubrange(0..<outboxHead)
            (releasedEnd, coveredEnd) = (releasedEnd - outboxHead, coveredEnd - outboxHead)
            outboxHead = 0
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        descriptor.close()
    }
}

/// A session in the daemon's namespace: the app family and the identifier (S1.1).
struct SessionKey: Hashable, CustomStringConvertible {
    var family: BundleIdentifier
    var identifier: SessionIdentifier
    var description: String { "\(family)/\(identifier)" }
}
