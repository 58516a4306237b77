import Foundation
import TransferContainer

/// A connection to the daemon that speaks the wire protocol by hand, for tests that send
/// what the library never would (boundary numbers, requests out of order). Blocking, with a
/// deadline on every read.
final class RawDaemonClient {
    let fd: FileDescriptor
    private var decoder = FrameDecoder(limit: Frame.maximumReplySize)
    private var nextID: UInt64 = 1

    init(_ container: TestContainer) throws {
        fd = try UnixSocket.connect(to: container.layout.daemonSocket.path)
    }

    deinit { fd.close() }

    /// Says hello as `identity` (one the test executable declares) and opens `session`.
    static func attached(_ container: TestContainer, as identity: AppIdentity, session: String, group: BundleIdentifier? = nil) throws -> RawDaemonClient {
        let client = try RawDaemonClient(container)
        let hello = ClientHello(identity: identity, executablePath: ProcessSpawner.currentExecutable, processName: "raw-client", isForeground: true)
        guard case .welcome = try client.request(.hello(hello)) else { throw TestFailure("hello refused") }
        var configuration = SessionConfiguration()
        configuration.sharedContainerIdentifier = group
        configuration.sessionSendsLaunchEvents = false
        guard case .sessionOpened = try client.request(.openSession(identifier: try SessionIdentifier(session), configuration: configuration, launchedForEvents: false)) else {
            throw TestFailure("openSession refused")
        }
        return client
    }

    /// Sends an encoded frame body as it is (it may be anything).
    func send(body: Data) throws {
        try UnixSocket.sendAll(fd, try Frame.frame(body))
    }

    /// Sends `request` and returns the daemon's reply to it (pushes are skipped).
    func request(_ request: DaemonRequest, timeout: TimeInterval = 10) throws -> DaemonReply {
        let id = nextID
        nextID += 1
        try send(body: try RecordCoding.encodeCompact(RequestFrame(id: id, request: request)))
        return try reply(to: id, timeout: timeout)
    }

    /// The reply to request `id`, skipping pushes and other replies; throws at the deadline
    /// or when the daemon hangs up.
    func reply(to id: UInt64, timeout: TimeInterval = 10) throws -> DaemonReply {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            while let body = try decoder.next() {
                if case .reply(let number, let reply) = try Frame.decode(DaemonFrame.self, from: body), number == id { return reply }
            }
            var descriptor = pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw TestFailure("no reply to request \(id) within \(timeout) s") }
            guard poll(&descriptor, 1, Int32(min(left, 10) * 1000)) >= 0 || errno == EINTR else { throw TestFailure("poll: \(errno)") }
            guard descriptor.revents != 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw TestFailure("the daemon closed the connection before replying to request \(id)") }
            buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }
}
