internal import CCurl
import Foundation

/// The set of transfers the event loop drives: a libcurl multi handle.
///
/// Owned by the event-loop thread; not Sendable. The one exception is waking a `poll` up,
/// which any thread may do through `waker` (a Sendable value that shares the handle).
///
/// One loop iteration: `poll(extra:timeout:)` (sleeps until a transfer's socket, an extra fd,
/// libcurl's own timer or `wakeup()` needs attention), then `perform()` (runs callbacks), then
/// `nextCompletion()` until nil.
package final class CurlMulti {
    /// One extra file descriptor for `poll` to watch, and what it found.
    package struct PollRequest {
        var fd: Int32
        var wantsRead: Bool
        var wantsWrite: Bool
        /// Set by `poll`. A peer that closed or reset shows up as readable (a read returns 0 or
        /// fails): libcurl passes on only POLLIN/POLLOUT/POLLPRI, never POLLHUP or POLLERR.
        /// So ask for reading on every connected socket, or a hang-up can go unnoticed.
        var readable = false
        var writable = false

        init(fd: Int32, wantsRead: Bool = true, wantsWrite: Bool = false) {
            self.fd = fd
            self.wantsRead = wantsRead
            self.wantsWrite = wantsWrite
        }
    }

    /// Wakes the owning thread's `poll` from any thread (curl_multi_wakeup is thread-safe).
    ///
    /// It also owns the `CURLM *`: the handle is cleaned up when the last of the `CurlMulti`
    /// and its wakers goes away, so a waker kept by another thread never points at freed memory.
    /// `@unchecked Sendable` because the only call made through it from other threads is
    /// curl_multi_wakeup; everything else goes through the owning `CurlMulti`.
    package final class Waker: @unchecked Sendable {
        fileprivate let handle: UnsafeMutableRawPointer

        fileprivate init(handle: UnsafeMutableRawPointer) {
            self.handle = handle
        }

        deinit {
            // Runs once nobody can use the handle any more (CurlMulti detached all easies).
            _ = curl_multi_cleanup(handle)
        }

        /// Makes the current or next `poll` return at once. Safe from any thread.
        package func wakeup() {
            _ = curl_multi_wakeup(handle)
        }
    }

    /// Shares the handle with other threads, for `wakeup()` only.
    package let waker: Waker
    private var handle: UnsafeMutableRawPointer { waker.handle }
    /// The transfers added and not yet completed or removed, by `CURL *`. Retaining them here
    /// is what keeps the unretained pointers libcurl holds (callback data) valid, and looking
    /// completions up here (not through CURLINFO_PRIVATE) never touches a freed object.
    private var transfers: [UnsafeMutableRawPointer: CurlEasy] = [:]

    package init() throws(CurlError) {
        try ensureCurlGlobalInit()
        guard let handle = curl_multi_init() else {
            throw CurlError(multiCode: CURLM_OUT_OF_MEMORY.rawValue)
        }
        waker = Waker(handle: handle)
        // Transfers to one origin share one HTTP/2 connection as streams (S2.7); the
        // per-host limit then counts connections, not transfers.
        _ = ccurl_multi_setopt_long(handle, CURLMOPT_PIPELINING, CCURL_PIPE_MULTIPLEX)
    }

    deinit {
        for easy in transfers.values {
            _ = curl_multi_remove_handle(handle, easy.handle)
            easy.isAttached = false
        }
    }

    /// How many transfers are added and not yet completed or removed.
    package var transferCount: Int { transfers.count }

    /// Connection limits across all transfers and per host; 0 means unlimited (the default).
    /// Transfers over the limit wait, queued inside libcurl.
    package func setMaximumConnections(total: Int, perHost: Int) {
        // Cannot fail for these options and non-negative values.
        _ = ccurl_multi_setopt_long(handle, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(0, total))
        _ = ccurl_multi_setopt_long(handle, CURLMOPT_MAX_HOST_CONNECTIONS, max(0, perHost))
    }

    /// Starts a transfer; it makes progress in later `perform()` calls. The multi keeps the
    /// object alive until `nextCompletion()` returns it or `remove` is called.
    /// Not from inside a callback.
    package func add(_ easy: CurlEasy) throws(CurlError) {
        guard !easy.isAttached else {
            throw CurlError(multiCode: CURLM_ADDED_ALREADY.rawValue)
        }
        try easy.prepareForTransfer()
        try check(curl_multi_add_handle(handle, easy.handle))
        easy.isAttached = true
        transfers[easy.handle] = easy
    }

    /// Stops a transfer without a completion (cancel). No-op if it is not in this multi.
    /// Not from inside a callback.
    package func remove(_ easy: CurlEasy) {
        guard transfers[easy.handle] === easy else { return }
        transfers[easy.handle] = nil
        _ = curl_multi_remove_handle(handle, easy.handle)
        easy.isAttached = false
    }

    /// Does all the work that is ready now, running the transfers' callbacks.
    /// Returns how many transfers are still running.
    @discardableResult
    package func perform() throws(CurlError) -> Int {
        var running: Int32 = 0
        try check(curl_multi_perform(handle, &running))
        return Int(running)
    }

    /// Sleeps until a transfer needs `perform()`, an extra fd is ready, `wakeup()` was called,
    /// or `timeout` passed (libcurl shortens it to its own next timer). Fills the results
    /// of `extra`. Returning says nothing about *why*: always follow it with `perform()`.
    package func poll(extra: inout [PollRequest], timeout: Duration) throws(CurlError) {
        var waitFDs = extra.map { request -> curl_waitfd in
            var events: Int16 = 0
            if request.wantsRead { events |= CCURL_WAIT_POLLIN }
            if request.wantsWrite { events |= CCURL_WAIT_POLLOUT }
            return curl_waitfd(fd: request.fd, events: events, revents: 0)
        }
        let milliseconds = Self.milliseconds(timeout)
        let code = waitFDs.withUnsafeMutableBufferPointer { buffer in
            curl_multi_poll(handle, buffer.baseAddress, UInt32(buffer.count), milliseconds, nil)
        }
        try check(code)
        for index in extra.indices {
            let revents = waitFDs[index].revents
            extra[index].readable = revents & (CCURL_WAIT_POLLIN | CCURL_WAIT_POLLPRI) != 0
            extra[index].writable = revents & CCURL_WAIT_POLLOUT != 0
        }
    }

    /// Same as `waker.wakeup()`, for the owning thread's own convenience.
    package func wakeup() {
        waker.wakeup()
    }

    /// The next finished transfer, already removed from this multi, with its outcome; nil when
    /// none is waiting. A completed HTTP exchange is `.success` whatever its status code.
    package func nextCompletion() -> (CurlEasy, Result<Void, CurlError>)? {
        var rawEasy: UnsafeMutableRawPointer? = nil
        var code = CURLE_OK
        while ccurl_multi_next_done(handle, &rawEasy, &code) != 0 {
            // Only ours: a handle removed since the message was queued is not reported.
            guard let rawEasy, let easy = transfers[rawEasy] else { continue }
            let result = easy.completionResult(code: code.rawValue)
            remove(easy)
            return (easy, result)
        }
        return nil
    }

    // MARK: Helpers

    private func check(_ code: CURLMcode) throws(CurlError) {
        guard code == CURLM_OK else { throw CurlError(multiCode: code.rawValue) }
    }

    /// Whole milliseconds, rounded up so a short wait never becomes a busy 0.
    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let sub = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        let total = seconds.multipliedReportingOverflow(by: 1000)
        if total.overflow || total.partialValue > Int64(Int32.max) { return Int32.max }
        return Int32(clamping: total.partialValue + sub)
    }
}
