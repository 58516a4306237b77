#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// The watchers built with no daemon (`SchedulerParts`), over one session with a running task
/// and two watching connections on socket pairs, with a set clock: a watcher that stops
/// reading (`bgtransfer watch` piped into something stuck) is disconnected once it has taken
/// nothing for `watcherPatience`, not before, and one that reads keeps getting the list.
@Suite final class WatchersTests {
    let fixture: SessionParts
    let reading: ClientConnection
    let stalled: ClientConnection
    var peers: [FileDescriptor] = []

    init() throws {
        fixture = try SessionParts("watchers")
        var connections: [ClientConnection] = []
        for id in 1...2 {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw Errno.current("socketpair") }
            let connection = ClientConnection(id: id, descriptor: FileDescriptor(rawValue: fds[0]))
            connection.isWatching = true
            connections.append(connection)
            peers.append(FileDescriptor(rawValue: fds[1]))
        }
        (reading, stalled) = (connections[0], connections[1])
        fixture.surroundings.watchingConnections = connections
        var task = try fixture.session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/watched")),
                                                   inBackground: false, pendingFailure: nil, at: fixture.parts.clock.now)
        task.state = .running
        fixture.session.update(task)
        fixture.surroundings.sessions[fixture.session.key] = fixture.session
    }

    deinit {
        reading.close()
        stalled.close()
        for peer in peers { peer.close() }
    }

    /// Bytes the reading watcher's peer can read now, without waiting.
    private func readByPeer() -> Int {
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(peers[0].rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            guard n > 0 else { return total }
            total += n
        }
    }

    /// One housekeeping turn `seconds` after the clock's start: the lists go out, and the
    /// reading watcher's peer reads what it was sent.
    private func turn(at seconds: TimeInterval, start: Date) -> Int {
        fixture.parts.clock.advance(by: start.addingTimeInterval(seconds).timeIntervalSince(fixture.parts.clock.now))
        fixture.parts.watchers.pushTransfersToWatchers(now: fixture.parts.clock.now)
        reading.releaseAll()
        reading.flush()
        return readByPeer()
    }

    @Test("A watcher that takes nothing is disconnected after watcherPatience (3 s) behind, not before; one that reads is kept and gets the list")
    func stalledWatcherDisconnected() throws {
        let start = fixture.parts.clock.now
        #expect(turn(at: 0, start: start) > 0, "the reading watcher got the running task")
        // (Quarter seconds: the watchers' pace is 0.2 s, and these add up exactly.)
        _ = turn(at: 0.25, start: start) // the stalled one's first list is still queued: it is behind from here
        _ = turn(at: 3.0, start: start)
        #expect(fixture.surroundings.disconnected.isEmpty, "2.75 s behind")
        _ = turn(at: 3.25, start: start)
        #expect(fixture.surroundings.disconnected == [stalled.id], "3 s behind")
        #expect(turn(at: 3.5, start: start) > 0, "the reading watcher still gets the list")
        #expect(fixture.surroundings.disconnected == [stalled.id])
    }
}
