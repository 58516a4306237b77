internal import Glibc
import Foundation
import TransferPOSIX

/// The daemon's one thread of control: it waits in `curl_multi_poll` on libcurl's sockets
/// and on the daemon's own descriptors (listener, clients, signal pipe) at once, then lets
/// libcurl move bytes, then runs the handlers of descriptors that became ready and the
/// timers that are due. Everything in the engine runs on this thread; nothing else touches
/// engine state, so the engine needs no locks. Timers are due by the loop's `TimeSource`, the
/// clock the daemon's rules read: a test that gives it a `ManualClock` advances the clock and
/// turns the loop instead of waiting (as swift-nio's `EmbeddedEventLoop.advanceTime(by:)`).
package final class EventLoop {
    /// What the loop does when a descriptor is ready.
    package struct Watch {
        var wantsWrite: () -> Bool
        var onReadable: () -> Void
        var onWritable: () -> Void

        package init(wantsWrite: @escaping () -> Bool, onReadable: @escaping () -> Void, onWritable: @escaping () -> Void) {
            self.wantsWrite = wantsWrite
            self.onReadable = onReadable
            self.onWritable = onWritable
        }
    }

    package let multi: CurlMulti
    private var watches: [Int32: Watch] = [:]
    private var timers: [(due: Date, id: Int, action: () -> Void)] = []
    /// What timers are due by.
    private let clock: any TimeSource
    private var nextTimerID = 0
    private(set) var isStopping = false
    /// Called with each transfer libcurl finished.
    package var onTransferCompleted: ((CurlEasy, Result<Void, CurlError>) -> Void)?
    /// Called once per turn, after handlers and timers (housekeeping).
    package var onTurn: (() -> Void)?
    /// Called when libcurl's multi interface fails (a bug in our use of it): the loop keeps
    /// turning so that clients are served, and says so.
    package var onMultiError: ((Error) -> Void)?

    package init(clock: any TimeSource = SystemTime()) throws {
        multi = try CurlMulti()
        self.clock = clock
    }

    package func watch(_ fd: FileDescriptor, _ watch: Watch) {
        watches[fd.rawValue] = watch
    }

    package func unwatch(_ fd: FileDescriptor) {
        watches.removeValue(forKey: fd.rawValue)
    }

    /// Runs `action` on the loop after `delay` seconds of the loop's clock.
    @discardableResult
    package func schedule(after delay: TimeInterval, _ action: @escaping () -> Void) -> Int {
        schedule(at: clock.now.addingTimeInterval(max(0, delay)), action)
    }

    /// Runs `action` on the loop in the first turn at or after `date` by the loop's clock.
    @discardableResult
    package func schedule(at date: Date, _ action: @escaping () -> Void) -> Int {
        nextTimerID += 1
        timers.append((date, nextTimerID, action))
        return nextTimerID
    }

    /// When the soonest timer is due, by the loop's clock; nil when none waits.
    package var nextDeadline: Date? { timers.map(\.due).min() }

    package func stop() {
        isStopping = true
        multi.wakeup()
    }

    /// Turns until `stop()`.
    package func run() {
        while !isStopping {
            turn(maximumWait: 0.25)
        }
    }

    /// One turn: wait (at most `maximumWait`, less if a timer is due), move bytes, dispatch.
    package func turn(maximumWait: TimeInterval) {
        var requests = watches.map { fd, watch in CurlMulti.PollRequest(fd: fd, wantsRead: true, wantsWrite: watch.wantsWrite()) }
        var wait = maximumWait
        if let soonest = nextDeadline { wait = min(wait, max(0, soonest.timeIntervalSince(clock.now))) }
        do {
            try multi.poll(extra: &requests, timeout: .milliseconds(Int(wait * 1000)))
            _ = try multi.perform()
        } catch {
            onMultiError?(error)
        }
        while let (easy, result) = multi.nextCompletion() {
            onTransferCompleted?(easy, result)
        }
        for request in requests {
            guard let watch = watches[request.fd] else { continue }
            if request.writable { watch.onWritable() }
            if request.readable, watches[request.fd] != nil { watch.onReadable() }
        }
        let now = clock.now
        let due = timers.filter { $0.due <= now }
        timers.removeAll { $0.due <= now }
        for timer in due.sorted(by: { $0.due < $1.due }) { timer.action() }
        onTurn?()
    }
}
