#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// A client connection's input on its own: who wrote it, how large its frames may be before a
/// hello, how much all unidentified peers may hold, and how much is read per turn.
@Suite final class ClientConnectionInputTests {
    let account = InputAccount(limit: 100 << 10)
    var pairs: [(connection: ClientConnection, peer: FileDescriptor)] = []
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)

    deinit {
        for (connection, peer) in pairs {
            connection.close()
            peer.close()
        }
        scratch.deallocate()
    }

    /// A connection and the socket at its other end (this process writes on it).
    func connected() throws -> (connection: ClientConnection, peer: FileDescriptor) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw Errno.current("socketpair") }
        let pair = (ClientConnection(id: pairs.count + 1, descriptor: FileDescriptor(rawValue: fds[0]), account: account), FileDescriptor(rawValue: fds[1]))
        pair.0.descriptor.setNonBlocking()
        pairs.append(pair)
        return pair
    }

    /// Everything the connection yields with one budget, up to the first non-frame.
    func drain(_ connection: ClientConnection, budget: Int) -> (frames: Int, end: ClientConnection.Input) {
        var budget = budget
        var frames = 0
        while true {
            let input = connection.nextInput(budget: &budget, scratch: scratch)
            guard case .frame = input else { return (frames, input) }
            frames += 1
        }
    }

    @Test("the connection speaks for the process that wrote its first bytes, as the kernel says")
    func writerIsTheKernels() throws {
        let (connection, peer) = try connected()
        try UnixSocket.sendAll(peer, try Frame.encode(RequestFrame(id: 1, request: .ping)))
        let (frames, end) = drain(connection, budget: 1 << 20)
        #expect(frames == 1)
        guard case .idle(more: false) = end else { Issue.record("\(end)"); return }
        #expect(connection.writer?.pid == getpid())
        #expect(connection.writer?.process?.isRunning == true, "with a handle on the writer until its hello is verified")
    }

    @Test("before a hello, a frame larger than 64 KiB closes the connection")
    func smallFramesBeforeHello() throws {
        let (connection, peer) = try connected()
        try UnixSocket.sendAll(peer, withUnsafeBytes(of: UInt32(Frame.maximumUnidentifiedSize + 1).bigEndian) { Data($0) })
        let (_, end) = drain(connection, budget: 1 << 20)
        guard case .refused(let failure) = end else { Issue.record("\(end)"); return }
        #expect(failure.code == TransferFailure.dataLengthExceedsMaximum)
        #expect(failure.message.contains("exceeds the limit of \(Frame.maximumUnidentifiedSize)"))
    }

    @Test("unfinished requests of unidentified peers are capped all together; what one is freed of goes back")
    func sharedCap() throws {
        let partial = withUnsafeBytes(of: UInt32(60 << 10).bigEndian) { Data($0) } + Data(count: 50 << 10)
        let (first, firstPeer) = try connected()
        try UnixSocket.sendAll(firstPeer, partial)
        guard case .idle(more: false) = drain(first, budget: 1 << 20).end else { Issue.record("the first is held"); return }
        #expect(account.bytes == partial.count)
        let (second, secondPeer) = try connected()
        try UnixSocket.sendAll(secondPeer, partial)
        guard case .refused(let failure) = drain(second, budget: 1 << 20).end else { Issue.record("the second is past the cap"); return }
        #expect(failure.code == TransferFailure.dataLengthExceedsMaximum)
        second.close()
        first.close()
        #expect(account.bytes == 0)
    }

    @Test("a read takes at most its budget of bytes; the rest waits for the next turn")
    func budgetPerTurn() throws {
        let (connection, peer) = try connected()
        let ping = try Frame.encode(RequestFrame(id: 1, request: .ping))
        var pings = Data()
        for _ in 0..<1_000 { pings.append(ping) }
        try UnixSocket.sendAll(peer, pings)
        let (firstTurn, end) = drain(connection, budget: 4 << 10)
        guard case .idle(more: true) = end else { Issue.record("\(end)"); return }
        #expect(firstTurn > 0 && firstTurn <= (4 << 10) / ping.count, "\(firstTurn) frames")
        var total = firstTurn
        for _ in 0..<1_000 {
            let (frames, end) = drain(connection, budget: 4 << 10)
            total += frames
            if case .idle(more: false) = end { break }
        }
        #expect(total == 1_000)
    }

    @Test("""
        an unfinished frame is dated by its first byte: bytes trickling in later do not move \
        the date the deadline counts from
        """)
    func unfinishedFrameDatedByItsFirstByte() throws {
        let (connection, peer) = try connected()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        var budget = 1 << 20
        try UnixSocket.sendAll(peer, withUnsafeBytes(of: UInt32(1_000).bigEndian) { Data($0) })
        _ = connection.nextInput(budget: &budget, scratch: scratch, now: start)
        #expect(connection.incompleteSince == start)
        for second in stride(from: 9.0, through: 36, by: 9) {
            try UnixSocket.sendAll(peer, Data("{".utf8))
            _ = connection.nextInput(budget: &budget, scratch: scratch, now: start.addingTimeInterval(second))
            #expect(connection.incompleteSince == start, "a byte \(second) s in")
        }
    }
}
