import Foundation
import Glibc
import Testing
import TestPeers

/// The port a test peer is started on is its own: held from the pick until the peer listens
/// (`PortReservation`, used by `Nginx.start`).
@Suite struct PortReservationTests {
    @Test("A reserved port is handed to no other bind to port 0 while held (5,000 tries), yet a socket that sets SO_REUSEADDR, as nginx does, binds and listens on it")
    func reservedPortIsTheHoldersAlone() throws {
        let reservation = try PortReservation()
        defer { reservation.release() }
        for _ in 0..<5_000 {
            let fd = Self.socketWithReuse()
            defer { close(fd) }
            try #require(Self.bind(fd, port: 0) == 0)
            try #require(Self.boundPort(fd) != reservation.port, "bind(0) was given the reserved port")
        }
        let peer = Self.socketWithReuse()
        defer { close(peer) }
        #expect(Self.bind(peer, port: reservation.port) == 0 && listen(peer, 4) == 0, "errno \(errno)")
        #expect(PeerProcess.accepts(port: reservation.port))
    }

    private static func socketWithReuse() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    private static func bind(_ fd: Int32, port: Int) -> Int32 {
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: UInt16(port).bigEndian, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    }

    private static func boundPort(_ fd: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
