import Foundation
import TransferContainer
import TransferPOSIX

/// A connection to the daemon's socket that speaks raw frames, as a hostile peer would: no
/// client library, nothing sent that the test did not ask for. Every wait has a deadline.
final class RawClient {
    let fd: FileDescriptor
    private var decoder = FrameDecoder(limit: Frame.maximumReplySize)
    private var buffer = [UInt8](repeating: 0, count: 64 << 10)
    private(set) var isClosedByDaemon = false

    init(_ container: TestContainer) throws {
        fd = try UnixSocket.connect(to: container.layout.daemonSocket.path)
    }

    func close() { fd.close() }

    func send(_ request: DaemonRequest, id: UInt64) throws {
        try UnixSocket.sendAll(fd, try Frame.encode(RequestFrame(id: id, request: request)))
    }

    /// Sends a request and waits for its reply (pushes are skipped); nil if the daemon closed
    /// the connection or did not answer in time.
    func request(_ request: DaemonRequest, id: UInt64, timeout: TimeInterval = 10) throws -> DaemonReply? {
        try send(request, id: id)
        return reply(to: id, timeout: timeout)
    }

    /// The reply to request `id` (or the refusal of a request the daemon could not read,
    /// which has number 0), reading with a deadline; pushes are skipped.
    func reply(to id: UInt64, timeout: TimeInterval = 10) -> DaemonReply? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            while let body = try? decoder.next() {
                guard case .reply(let number, let reply) = try? Frame.decode(DaemonFrame.self, from: body) else { continue }
                if number == id || number == 0 { return reply }
            }
            guard readSome(until: deadline) else { return nil }
        }
    }

    /// The next reply of any number, with its number, reading with a deadline; pushes are
    /// skipped. Nil if the daemon closed the connection or said nothing in time.
    func nextReply(timeout: TimeInterval = 10) -> (id: UInt64, reply: DaemonReply)? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            while let body = try? decoder.next() {
                guard case .reply(let number, let reply) = try? Frame.decode(DaemonFrame.self, from: body) else { continue }
                return (number, reply)
            }
            guard readSome(until: deadline) else { return nil }
        }
    }

    /// Waits until the daemon closes the connection (reading and dropping what it sends).
    func waitUntilClosed(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !isClosedByDaemon {
            guard readSome(until: deadline) || isClosedByDaemon else { return false }
            while (try? decoder.next()) != nil {}
        }
        return true
    }

    /// Reads once, waiting at most until `deadline`; false at the deadline or at the end.
    private func readSome(until deadline: Date) -> Bool {
        let wait = Int32(max(0, min(deadline.timeIntervalSinceNow, 60)) * 1000)
        var entry = pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, wait) > 0 else { return false }
        let n = buffer.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n <= 0 {
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return true }
            isClosedByDaemon = true
            return false
        }
        buffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        return true
    }
}

extension RawClient {
    /// Says hello as `identity` (one the test executable declares), waits for the welcome,
    /// and opens `session`.
    static func attached(_ container: TestContainer, as identity: AppIdentity, session: String, group: BundleIdentifier? = nil) throws -> RawClient {
        let client = try welcomed(container, as: identity)
        var configuration = SessionConfiguration()
        configuration.sharedContainerIdentifier = group
        configuration.sessionSendsLaunchEvents = false
        guard case .sessionOpened = try client.request(.openSession(identifier: try SessionIdentifier(session), configuration: configuration, launchedForEvents: false)) else {
            throw TestFailure("openSession refused")
        }
        return client
    }

    /// Says hello as `identity` (one the test executable declares) and waits for the welcome.
    static func welcomed(_ container: TestContainer, as identity: AppIdentity) throws -> RawClient {
        let client = try RawClient(container)
        let hello = ClientHello(identity: identity, executablePath: ProcessSpawner.currentExecutable, processName: "raw-client", isForeground: true)
        guard case .welcome = try client.request(.hello(hello)) else { throw TestFailure("hello refused") }
        return client
    }

    /// Sends `request` under a number of its own and returns the reply; throws when none came.
    func request(_ request: DaemonRequest, timeout: TimeInterval = 10) throws -> DaemonReply {
        let id = UInt64.random(in: 1_000_000...UInt64(Int64.max))
        guard let reply = try self.request(request, id: id, timeout: timeout) else {
            throw TestFailure("no reply to \(request) within \(timeout) s (connection closed: \(isClosedByDaemon))")
        }
        return reply
    }

    /// Sends an encoded frame body as it is (it may be anything).
    func send(body: Data) throws {
        try UnixSocket.sendAll(fd, try Frame.frame(body))
    }
}

extension DaemonReply {
    /// The failure's message, if the reply is one.
    var failureMessage: String? {
        if case .failure(let failure) = self { return failure.message }
        return nil
    }
}

/// The daemon's resident memory (`VmRSS` in `/proc/<pid>/status`), in bytes.
func residentBytes(of pid: Int32) -> Int {
    statusBytes("VmRSS", of: pid)
}

/// The most the daemon's resident memory has been since it started (`VmHWM`), in bytes.
func peakResidentBytes(of pid: Int32) -> Int {
    statusBytes("VmHWM", of: pid)
}

/// A field of `/proc/<pid>/status` given in kB, in bytes; 0 when it cannot be read.
private func statusBytes(_ field: String, of pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
          let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return 0 }
    return kilobytes << 10
}
