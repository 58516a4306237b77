import Foundation

/// A TCP server on a free 127.0.0.1 port that accepts every connection and then neither reads
/// nor writes: a server whose TLS handshake never finishes. It counts what it accepted, so a
/// test can wait for its peers to be stalled on it. One accept thread; the count and the
/// sockets sit behind one lock, so every method may be called from any thread. `stop()` (also
/// on deinit) closes every socket and waits for the thread.
package final class SilentPeer: @unchecked Sendable {
    package let port: Int
    private let listener: Int32
    private let condition = NSCondition()
    private var sockets: [Int32] = []
    private var stopping = false
    private var running = true

    package init() throws {
        (listener, port) = try PeerProcess.listenOnLoopback(backlog: 1024, what: "silent peer")
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "SilentPeer accept :\(port)"
        thread.start()
    }

    deinit {
        stop()
    }

    /// Connections accepted so far.
    package var accepted: Int {
        condition.lock()
        defer { condition.unlock() }
        return sockets.count
    }

    /// Waits until `count` connections were accepted, or `deadline`; whether they were.
    package func waitForConnections(_ count: Int, until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while sockets.count < count { if !condition.wait(until: deadline) { break } }
        return sockets.count >= count
    }

    /// Closes the listener and every connection; waits (up to 10 s) for the accept thread.
    /// Idempotent.
    package func stop() {
        condition.lock()
        if !stopping {
            stopping = true
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        let deadline = Date() + 10
        while running && condition.wait(until: deadline) {}
        condition.unlock()
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            condition.lock()
            if fd < 0 && (errno == EINTR || errno == ECONNABORTED) && !stopping {
                condition.unlock()
                continue
            }
            guard fd >= 0, !stopping else {
                if fd >= 0 { close(fd) }
                for socket in sockets { close(socket) }
                close(listener)
                running = false
                condition.broadcast()
                condition.unlock()
                return
            }
            sockets.append(fd)
            condition.broadcast()
            condition.unlock()
        }
    }
}
