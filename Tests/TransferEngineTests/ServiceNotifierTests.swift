import Foundation
import Glibc
import Testing
@testable import TransferEngine
import TransferPOSIX

/// The notify protocol's datagram socket and the socket-activation variables, on their own.
/// The environment is passed in: the test process's own is not changed (other tests' threads
/// read it while they start processes).
@Suite struct ServiceNotifierTests {
    /// A datagram socket bound to the abstract name `name` (no file), and a way to read one datagram.
    private func abstractListener(_ name: String) throws -> (fd: Int32, read: () -> String?) {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = [0] + Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)) } }
        try #require(bound == 0, "bind @\(name): errno \(errno)")
        return (fd, {
            var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&waiting, 1, 5000) == 1 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 1024)
            let n = recv(fd, &buffer, buffer.count, 0)
            return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        })
    }

    @Test("NOTIFY_SOCKET=@name reaches an abstract socket; WATCHDOG_USEC for our pid is kept in seconds")
    func abstractName() throws {
        let name = "bgt-notify-\(getpid())-\(UUID().uuidString.prefix(8))"
        let listener = try abstractListener(name)
        defer { close(listener.fd) }
        let notifier = try #require(try ServiceNotifier.fromEnvironment(["NOTIFY_SOCKET": "@\(name)", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "\(getpid())"]))
        #expect(notifier.watchdogInterval == 2)
        try notifier.send("READY=1\nSTATUS=0 sessions, 0 running tasks")
        #expect(listener.read() == "READY=1\nSTATUS=0 sessions, 0 running tasks")
    }

    @Test("A watchdog meant for another pid is not ours; a name that is neither a path nor @abstract is refused naming it")
    func otherPidAndBadName() throws {
        let other = try #require(try ServiceNotifier.fromEnvironment(["NOTIFY_SOCKET": "/tmp/none.sock", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"]))
        #expect(other.watchdogInterval == nil)
        #expect(try ServiceNotifier.fromEnvironment([:]) == nil)
        #expect(throws: Errno.self) { _ = try ServiceNotifier.fromEnvironment(["NOTIFY_SOCKET": "relative.sock"]) }
        do {
            _ = try ServiceNotifier(name: "vsock:2:1234", watchdogInterval: nil)
            Issue.record("a vsock address was taken for a Unix socket")
        } catch {
            #expect(error.path == "vsock:2:1234")
        }
    }

    @Test("LISTEN_FDS meant for another process (LISTEN_PID not ours) is ignored; an unreadable count is an error")
    func activationVariables() throws {
        #expect(try SocketActivation.listener(for: "/tmp/x.sock", environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1"]) == nil)
        #expect(try SocketActivation.listener(for: "/tmp/x.sock", environment: [:]) == nil)
        #expect(throws: SocketActivationError.badVariable("LISTEN_FDS=many")) {
            _ = try SocketActivation.listener(for: "/tmp/x.sock", environment: ["LISTEN_PID": "\(getpid())", "LISTEN_FDS": "many"])
        }
    }
}
