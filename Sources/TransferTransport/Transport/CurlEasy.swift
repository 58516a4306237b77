internal import CCurl
#if canImport(Glibc)
internal import Glibc
#endif
import TransferContainer

/// One HTTP exchange: a libcurl easy handle with Swift closures for its callbacks.
///
/// Owned by the engine's event-loop thread, like the `CurlMulti` that drives it; not Sendable.
/// Configure it, add it to a `CurlMulti`, and read the results after the multi reports it done.
/// Its callbacks run on that thread, inside `CurlMulti.perform()` (and inside `resume()`, see there).
///
/// Fixed for every handle (project rules): only http and https, also for redirects; no
/// signals; libcurl never decompresses, so the body is the server's bytes; no `Expect: 100-continue`.
package final class CurlEasy {
    /// What `onBody` did with the bytes it was offered.
    package enum BodyDisposition {
        /// All bytes were taken.
        case consumed
        /// None were taken: libcurl keeps them and offers the *same* bytes again after `resume()`.
        case pause
        /// Stop the transfer; it completes with `CurlError.Kind.aborted`.
        case abort
    }

    /// What `onUploadRead` put into the buffer it was given.
    package enum UploadDisposition {
        /// This many bytes were written to the start of the buffer; 0 means the body is complete.
        case bytes(Int)
        /// Nothing now: sending pauses until `resume()`, which calls `onUploadRead` again.
        case pause
        /// Stop the transfer; it completes with `CurlError.Kind.aborted`.
        case abort
    }

    /// The `CURL *`. Internal only so that `CurlMulti` (this folder) can attach it.
    package let handle: UnsafeMutableRawPointer
    /// libcurl writes a detailed message here on failure (CURLOPT_ERRORBUFFER).
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// The request's state its setters keep (see `CurlEasy+Request.swift`).
    var headerList: CurlHeaderList?
    var method = "GET"
    var uploadSize: Int64?
    /// Set when one of our callbacks told libcurl to stop, so the resulting
    /// CURLE_WRITE_ERROR / CURLE_ABORTED_BY_CALLBACK is reported as `.aborted`.
    private var callbackAborted = false
    /// A failure seen outside `perform` (from `curl_easy_pause`) that must end the transfer.
    private var pendingFailure: UInt32?

    /// The idle timeout (`setIdleTimeout`): the longest the exchange may go without a byte
    /// moving either way. Nil: none.
    var idleTimeout: Double? {
        get { idleWatch.timeout }
        set { idleWatch.timeout = newValue }
    }
    private var idleWatch = IdleWatch()
    /// Set when the idle timeout ended the transfer; reported as `.timedOut`.
    private var idleExpired = false
    /// Whether receiving or sending is paused on purpose: waiting on ourselves is not idle.
    private var isPaused = false

    /// Under the app's accepted key only (`setTLS`): stops at a redirect to another origin.
    var redirectCheck: RedirectOriginCheck?
    private var headerBudget = ResponseHeaderBudget()
    /// Whether a `CurlMulti` holds this handle now (one at a time). Set by `CurlMulti` only.
    package var isAttached = false

    // MARK: Callbacks

    /// Each raw response header line without its CRLF, including status lines and the empty
    /// line that ends each header block, for every response: 1xx, redirects and the final one
    /// (a new block starts at each "HTTP/" line; over HTTP/2 it reads "HTTP/2 200"). Trailers
    /// of a chunked body, if a server sends any, come after the body.
    /// Called before each of the callbacks below, for the owner's bookkeeping (the daemon
    /// notes which task it is working on, see `CrashGuard`).
    package var onCallback: (() -> Void)?
    package var onHeaderLine: ((String) -> Void)?
    /// Response body bytes; the buffer is valid only during the call. Never called with an
    /// empty buffer, so an empty body means no call at all. Nil consumes everything.
    package var onBody: ((UnsafeRawBufferPointer) -> BodyDisposition)?
    /// Request body bytes: fill the buffer from its start. Nil, or a request without it, sends
    /// no body. Setting it is what makes the request have a body (see `setMethod`).
    package var onUploadRead: ((UnsafeMutableRawBufferPointer) -> UploadDisposition)?
    /// Moves the upload source to this absolute offset (0 = from the start); true on success.
    /// libcurl needs it to send the body again: a 307/308 redirect, or a reused connection that
    /// turned out dead. Nil means "cannot rewind", and such a resend fails with `.readFailed`.
    package var onUploadSeek: ((Int64) -> Bool)?
    /// Progress, called often while data moves and about once a second otherwise.
    /// Totals are 0 while unknown. Return false to abort.
    package var onProgress: ((_ downloaded: Int64, _ downloadTotal: Int64,
                      _ uploaded: Int64, _ uploadTotal: Int64) -> Bool)?

    // MARK: Life cycle

    package init() throws(CurlError) {
        try ensureCurlGlobalInit()
        guard let handle = curl_easy_init() else {
            throw CurlError(transferCode: CURLE_FAILED_INIT.rawValue)
        }
        self.handle = handle
        errorBuffer = .allocate(capacity: CCURL_ERROR_SIZE)
        errorBuffer.initialize(repeating: 0, count: CCURL_ERROR_SIZE)

        let me = Unmanaged.passUnretained(self).toOpaque()
        var code = CURLE_OK
        func record(_ result: CURLcode) { if code == CURLE_OK { code = result } }
        record(ccurl_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer))
        // Security rule of the project: http and https only, also where redirects may lead.
        record(ccurl_easy_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"))
        record(ccurl_easy_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https"))
        // The daemon is multi-threaded; libcurl must not use signals (alarm for DNS timeouts).
        record(ccurl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1))
        // Bytes on disk are the server's bytes: no ACCEPT_ENCODING, and never decode.
        record(ccurl_easy_setopt_long(handle, CURLOPT_HTTP_CONTENT_DECODING, 0))
        // Long background transfers may sit idle behind NATs.
        record(ccurl_easy_setopt_long(handle, CURLOPT_TCP_KEEPALIVE, 1))
        // HTTP/2 whenever the server offers it by ALPN (S2.7). Whether a transfer waits to
        // share a connection (PIPEWAIT) is set with the URL (`setURL`): over https only.
        record(ccurl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, CCURL_HTTP_VERSION_2TLS))
        // Verify against the system's store, named explicitly (S2.6); see `setTLS`.
        record(applyTLS(.systemDefault))

        record(ccurl_easy_setopt_write_callback(handle, curlWriteTrampoline))
        record(ccurl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, me))
        record(ccurl_easy_setopt_header_callback(handle, curlHeaderTrampoline))
        record(ccurl_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, me))
        // Always installed: libcurl's default read callback would read stdin.
        record(ccurl_easy_setopt_read_callback(handle, curlReadTrampoline))
        record(ccurl_easy_setopt_pointer(handle, CURLOPT_READDATA, me))
        record(ccurl_easy_setopt_seek_callback(handle, curlSeekTrampoline))
        record(ccurl_easy_setopt_pointer(handle, CURLOPT_SEEKDATA, me))
        // Always on, also without onProgress: it is how a failure noticed in resume() ends
        // the transfer at the next perform.
        record(ccurl_easy_setopt_xferinfo_callback(handle, curlProgressTrampoline))
        record(ccurl_easy_setopt_pointer(handle, CURLOPT_XFERINFODATA, me))
        record(ccurl_easy_setopt_long(handle, CURLOPT_NOPROGRESS, 0))
        guard code == CURLE_OK else {
            // Every stored property is set by now, so deinit runs and cleans up.
            throw CurlError(transferCode: code.rawValue)
        }
    }

    deinit {
        // A CurlMulti retains every handle it holds, so we are never attached here.
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
        // headerList is released after this body, i.e. after libcurl let go of it.
    }

    // MARK: Pausing

    /// Sets the whole pause state: `receiving` stops body delivery, `sending` stops upload reads.
    /// (pause(receiving: false, sending: false) is `resume()`.)
    package func pause(receiving: Bool, sending: Bool) {
        let bits = (receiving ? CCURL_PAUSE_RECV : 0) | (sending ? CCURL_PAUSE_SEND : 0)
        isPaused = bits != 0
        noteActivity()
        setPauseState(bits)
    }

    /// Lifts every pause, including one asked for by returning `.pause` from a callback.
    ///
    /// Re-entrancy: libcurl delivers bytes it kept while paused *synchronously, inside this
    /// call*, so `onBody` may run (and may pause again) before `resume()` returns. Everything
    /// else continues on the next `CurlMulti.perform()`; libcurl makes the next `poll` return
    /// at once for that. Do not call it from inside this handle's own callbacks.
    package func resume() {
        isPaused = false
        noteActivity()
        setPauseState(CCURL_PAUSE_CONT)
    }

    private func setPauseState(_ bits: Int32) {
        let code = curl_easy_pause(handle, bits)
        if code != CURLE_OK && pendingFailure == nil {
            // E.g. onBody returned .abort for the bytes delivered inside curl_easy_pause.
            // libcurl has dropped those bytes but would carry on with the next ones, so make
            // the progress callback end the transfer at the next perform.
            pendingFailure = code.rawValue
        }
    }

    // MARK: For CurlMulti

    /// Applies method and body options and clears the state of a previous run.
    /// Called by `CurlMulti.add` right before `curl_multi_add_handle`.
    package func prepareForTransfer() throws(CurlError) {
        errorBuffer[0] = 0
        callbackAborted = false
        pendingFailure = nil
        idleExpired = false
        isPaused = false
        if redirectCheck != nil { redirectCheck = RedirectOriginCheck() }
        headerBudget = ResponseHeaderBudget()
        idleWatch.restart()
        let hasBody = onUploadRead != nil
        let bodySize = hasBody ? (uploadSize ?? -1) : 0
        // Back to a plain GET first (clears UPLOAD, NOBODY, POST and a custom verb), so a
        // reused handle carries nothing over from its previous request.
        try check(ccurl_easy_setopt_long(handle, CURLOPT_HTTPGET, 1))
        try check(ccurl_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, nil))
        switch method {
        case "GET" where !hasBody:
            break
        case "HEAD":
            try check(ccurl_easy_setopt_long(handle, CURLOPT_NOBODY, 1))
        case "POST":
            try check(ccurl_easy_setopt_long(handle, CURLOPT_POST, 1))
            try check(ccurl_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, Int(bodySize)))
        case "PUT":
            try check(ccurl_easy_setopt_long(handle, CURLOPT_UPLOAD, 1))
            try check(ccurl_easy_setopt_off_t(handle, CURLOPT_INFILESIZE_LARGE, Int(bodySize)))
        default:
            if hasBody {
                try check(ccurl_easy_setopt_long(handle, CURLOPT_UPLOAD, 1))
                try check(ccurl_easy_setopt_off_t(handle, CURLOPT_INFILESIZE_LARGE, Int(bodySize)))
            }
            try check(ccurl_easy_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
        }
        if headerList == nil {
            try setHeaders([])  // so "Expect:" is always suppressed
        }
    }

    /// The outcome of a finished transfer, given libcurl's result code.
    package func completionResult(code: UInt32) -> Result<Void, CurlError> {
        if code == CURLE_OK.rawValue && !callbackAborted && pendingFailure == nil && !idleExpired {
            return .success(())
        }
        if let target = redirectCheck?.refused { return .failure(CurlError(redirectFromAcceptedKeyTo: target)) }
        if let failure = headerBudget.failure(from: effectiveURL) { return .failure(failure) }
        if idleExpired {
            let seconds = idleTimeout.map { CheckedNumbers.wholeSeconds($0) } ?? 0
            return .failure(CurlError(kind: .timedOut, origin: .transfer, code: Int(CURLE_OPERATION_TIMEDOUT.rawValue),
                                      message: "no data for \(seconds) s (the request's idle timeout)"))
        }
        // A failure from resume() is the real cause; libcurl only reports our progress abort.
        let cause = pendingFailure ?? code
        let detail = pendingFailure == nil ? String(cString: errorBuffer) : nil
        if pendingFailure == nil, !callbackAborted,
           code == CURLE_PEER_FAILED_VERIFICATION.rawValue || code == CURLE_SSL_CONNECT_ERROR.rawValue {
            return .failure(CurlError(tlsCode: code, verifyResult: sslVerifyResult, detail: detail, url: effectiveURL))
        }
        if pendingFailure == nil, !callbackAborted, code == CURLE_SSL_PINNEDPUBKEYNOTMATCH.rawValue {
            // Not the key the app accepted: as untrusted as any unverified chain.
            let base = CurlError(transferCode: code, detail: detail)
            return .failure(CurlError(kind: .serverTrustFailed(urlErrorCode: TransferFailure.serverCertificateUntrusted),
                                      origin: .transfer, code: base.code, message: base.message))
        }
        return .failure(CurlError(transferCode: cause, detail: detail,
                                  callbackAborted: callbackAborted))
    }

    // MARK: Called by the C trampolines (event-loop thread, inside libcurl)

    func deliverBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if callbackAborted { return 0 }
        noteActivity()
        guard bytes.count > 0, let onBody else { return bytes.count }
        onCallback?()
        switch onBody(bytes) {
        case .consumed:
            return bytes.count
        case .pause:
            isPaused = true
            return CCURL_WRITEFUNC_PAUSE
        case .abort:
            callbackAborted = true
            return 0  // anything but bytes.count makes libcurl stop with CURLE_WRITE_ERROR
        }
    }

    /// False stops the transfer (CURLE_WRITE_ERROR): a redirect `redirectCheck` refuses, or
    /// headers past `TransferLimits`.
    func deliverHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        noteActivity()
        guard headerBudget.admits(bytes) else { return false }
        guard onHeaderLine != nil || redirectCheck != nil else { return true }
        onCallback?()
        var line = bytes[...]
        while let last = line.last, last == 0x0A || last == 0x0D { line = line.dropLast() }
        let text = decodeHeaderLine(UnsafeRawBufferPointer(rebasing: line))
        if redirectCheck?.refuses(after: text, currentURL: effectiveURL) == true { return false }
        onHeaderLine?(text)
        return true
    }

    func readUpload(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if callbackAborted { return CCURL_READFUNC_ABORT }
        guard let onUploadRead else { return 0 }
        onCallback?()
        switch onUploadRead(buffer) {
        case .bytes(let count):
            guard count >= 0 && count <= buffer.count else {
                callbackAborted = true
                return CCURL_READFUNC_ABORT
            }
            return count
        case .pause:
            isPaused = true
            return CCURL_READFUNC_PAUSE
        case .abort:
            callbackAborted = true
            return CCURL_READFUNC_ABORT
        }
    }

    func seekUpload(to offset: Int64) -> Int32 {
        guard let onUploadSeek else { return CCURL_SEEKFUNC_CANTSEEK }
        return onUploadSeek(offset) ? CCURL_SEEKFUNC_OK : CCURL_SEEKFUNC_FAIL
    }

    func reportProgress(downloaded: Int64, downloadTotal: Int64,
                                    uploaded: Int64, uploadTotal: Int64) -> Int32 {
        if pendingFailure != nil || callbackAborted || idleExpired { return 1 }
        if idleWatch.hasExpired(downloaded: downloaded, uploaded: uploaded, paused: isPaused) {
            idleExpired = true
            return 1
        }
        guard let onProgress else { return 0 }
        if onProgress(downloaded, downloadTotal, uploaded, uploadTotal) { return 0 }
        callbackAborted = true
        return 1
    }

    // MARK: Idle timeout

    /// A byte moved (or we paused on purpose): the idle clock starts again.
    private func noteActivity() {
        idleWatch.noteActivity()
    }

    // MARK: Helpers

    func check(_ code: CURLcode) throws(CurlError) {
        guard code == CURLE_OK else {
            throw CurlError(transferCode: code.rawValue, detail: String(cString: errorBuffer))
        }
    }
}
