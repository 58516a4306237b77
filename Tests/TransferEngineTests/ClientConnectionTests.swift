#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// A client connection's output on its own: replies and pushes leave only once the commit
/// that covers them is on disk, in the order they were queued.
@Suite final class ClientConnectionTests {
    let connection: ClientConnection
    let peer: FileDescriptor
    /// Keeps a frame cut between two reads.
    var decoder = FrameDecoder()

    init() throws {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw Errno.current("socketpair") }
        connection = ClientConnection(id: 1, descriptor: FileDescriptor(rawValue: fds[0]))
        peer = FileDescriptor(rawValue: fds[1])
        // A session holder's output (a peer that has not said who it is may queue little).
        let bundle = try BundleIdentifier("com.example.holder")
        connection.hello = ClientHello(identity: AppIdentity(bundleIdentifier: bundle, kind: .app, containingApp: bundle, containingAppExecutable: "holder", appGroups: []), executablePath: "/holder", processName: "holder", isForeground: true)
    }

    deinit {
        connection.close()
        peer.close()
    }

    /// The replies' identifiers the peer can read now, without waiting.
    private func received() throws -> [UInt64] {
        try readableFrames(from: peer, decoder: &decoder).compactMap { frame in
            guard case .reply(let id, _) = frame else { return nil }
            return id
        }
    }

    @Test("an answer larger than the outbox limit is queued whole when the peer has read what came before; a push after it counts only what follows it; an answer to a peer that has not read it is refused")
    func bigAnswerIsQueuedWhole() {
        let limit = ClientConnection.outboxLimit
        connection.beginAnswer()
        #expect(connection.send(frame: Data(count: limit + (1 << 20))), "a session's backlog larger than the limit is one answer")
        connection.endAnswer()
        #expect(connection.send(frame: Data(count: 1 << 20)), "a push while the peer reads the answer")
        connection.beginAnswer()
        #expect(!connection.send(frame: Data(count: 100)), "a peer that asks again without reading is cut off")
        connection.endAnswer()
    }

    @Test("output queued before a commit starts leaves when it is on disk; output queued after waits for the next")
    func outputWaitsForItsCommit() throws {
        connection.send(.reply(id: 1, .ok))
        connection.flush()
        #expect(try received().isEmpty, "nothing leaves before it is covered by a commit")
        connection.coverByCommit()
        connection.send(.reply(id: 2, .ok))
        connection.flush()
        #expect(try received().isEmpty, "nothing leaves while its commit is under way")
        #expect(!connection.hasReleasedOutput)
        connection.releaseCovered()
        #expect(connection.hasReleasedOutput)
        connection.flush()
        #expect(try received() == [1])
        connection.coverByCommit()
        connection.releaseCovered()
        connection.flush()
        #expect(try received() == [2])
        #expect(!connection.hasReleasedOutput)
    }

    @Test("while commits fail, a frame that tells of no change goes at once, ahead of the output that waits for the disk")
    func overtakingWhileCommitsFail() throws {
        connection.send(.reply(id: 1, .ok))
        connection.coverByCommit() // the commit that fails: reply 1 waits for the disk
        connection.send(.reply(id: 2, .ok)) // waits for the next commit
        connection.send(.reply(id: 3, .ok), overtaking: true) // a listing, a ping's answer
        connection.flush()
        #expect(try received() == [3])
        connection.send(.reply(id: 4, .ok), overtaking: true)
        connection.flush()
        #expect(try received() == [4], "overtaking frames keep their own order")
        connection.releaseCovered() // the disk takes the commit again
        connection.flush()
        #expect(try received() == [1])
        connection.releaseAll()
        connection.flush()
        #expect(try received() == [2])
        connection.send(.reply(id: 5, .ok), overtaking: true)
        connection.flush()
        #expect(try received() == [5], "with nothing held, it goes at once too")
    }

    @Test("with nothing to commit, everything queued leaves at once, in order")
    func releaseAll() throws {
        for id in 1...3 { connection.send(.reply(id: UInt64(id), .ok)) }
        connection.releaseAll()
        connection.flush()
        #expect(try received() == [1, 2, 3])
    }

    @Test("output larger than the socket takes is sent in parts, and only up to what was released")
    func partialSends() throws {
        let count: UInt64 = 20_000 // several times what a socket buffers
        for id in 1...count { connection.send(.reply(id: id, .ok)) }
        connection.coverByCommit()
        connection.send(.reply(id: count + 1, .ok))
        connection.releaseCovered()
        connection.flush()
        #expect(connection.hasReleasedOutput, "the socket took only part")
        var seen = try received()
        for _ in 0..<10_000 where connection.hasReleasedOutput {
            connection.flush()
            seen += try received()
        }
        seen += try received()
        #expect(seen == Array(1...count))
        connection.releaseAll()
        connection.flush()
        #expect(try received() == [count + 1])
    }
}
