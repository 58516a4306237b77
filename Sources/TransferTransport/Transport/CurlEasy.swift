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
    private var headerList: CurlHeaderList?
    private var method = "GET"
    private var uploadSize: Int64?
    /// Set when one of our callbacks told libcurl to stop, so the resulting
    /// CURLE_WRITE_ERROR / CURLE_ABORTED_BY_CALLBACK is reported as `.aborted`.
    private var callbackAborted = false
    /// A failure seen outside `perform` (from `curl_easy_pause`) that must end the transfer.
    private var pendingFailure: UInt32?

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
        // HTTP/2 whenever the server offers it by ALPN (S2.7), and a transfer to an origin
        // that already has a connection (or one being made) waits to share it rather than
        // open another.
        record(ccurl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, CCURL_HTTP_VERSION_2TLS))
        record(ccurl_easy_setopt_long(handle, CURLOPT_PIPEWAIT, 1))
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

    // MARK: Request

    /// Sets the URL after checking it parses and is http or https.
    package func setURL(_ url: String) throws(CurlError) {
        guard let parsed = curl_url() else {
            throw CurlError(transferCode: CURLE_OUT_OF_MEMORY.rawValue)
        }
        defer { curl_url_cleanup(parsed) }
        let parseCode = curl_url_set(parsed, CURLUPART_URL, url, 0)
        guard parseCode == CURLUE_OK else { throw CurlError(urlCode: parseCode.rawValue) }
        var scheme: UnsafeMutablePointer<CChar>? = nil
        let schemeCode = curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0)
        defer { curl_free(scheme) }
        guard schemeCode == CURLUE_OK, let scheme else { throw CurlError(urlCode: schemeCode.rawValue) }
        let name = String(cString: scheme).lowercased()
        guard name == "http" || name == "https" else {
            throw CurlError(transferCode: CURLE_UNSUPPORTED_PROTOCOL.rawValue,
                            detail: "scheme \(name) is not allowed")
        }
        try check(ccurl_easy_setopt_string(handle, CURLOPT_URL, url))
    }

    /// The HTTP method, "GET" by default. Applied when the handle is added to a `CurlMulti`,
    /// together with `onUploadRead` and `setUploadSize`, so the call order does not matter:
    /// - HEAD: no body is read (CURLOPT_NOBODY).
    /// - POST: CURLOPT_POST, body from `onUploadRead` (none if nil). libcurl adds
    ///   `Content-Type: application/x-www-form-urlencoded` unless a header sets one, and turns
    ///   it into GET on a 301/302/303 redirect, as browsers and URLSession do.
    /// - PUT: CURLOPT_UPLOAD (an empty body if `onUploadRead` is nil).
    /// - anything else: CURLOPT_CUSTOMREQUEST, with an upload if `onUploadRead` is set.
    package func setMethod(_ method: String) {
        self.method = method.uppercased()
    }

    /// Replaces the request header lines ("Name: value"). See `CurlHeaderList` for the rules.
    package func setHeaders(_ lines: [String]) throws(CurlError) {
        let list = try CurlHeaderList(lines: lines)
        try check(ccurl_easy_setopt_slist(handle, CURLOPT_HTTPHEADER,
                                          UnsafeMutablePointer<curl_slist>(list.head)))
        headerList = list  // the previous list is freed only now that libcurl no longer uses it
    }

    /// Asks for the body from `offset` on (`Range: bytes=N-`); nil asks for all of it.
    /// CURLOPT_RANGE rather than RESUME_FROM: with RESUME_FROM libcurl fails the transfer when
    /// the server answers 200 (e.g. because an If-Range validator no longer matched), while
    /// we want to see that 200 and restart. So check `responseCode` (206 vs 200) in the caller,
    /// which also adds the If-Range header itself.
    package func setRange(from offset: Int64?) {
        let value = offset.map { "\(max(0, $0))-" }
        _ = ccurl_easy_setopt_string(handle, CURLOPT_RANGE, value)
    }

    /// HTTP authentication schemes libcurl may answer a challenge with.
    package struct AuthSchemes: OptionSet {
        package let rawValue: Int
        package init(rawValue: Int) { self.rawValue = rawValue }
        package static let basic = AuthSchemes(rawValue: 1)   // CURLAUTH_BASIC: sent at once
        package static let digest = AuthSchemes(rawValue: 2)  // CURLAUTH_DIGEST: libcurl answers the nonce itself
    }

    /// User and password for the origin (nil: none).
    package func setServerCredential(user: String?, password: String?, schemes: AuthSchemes) {
        _ = ccurl_easy_setopt_string(handle, CURLOPT_USERNAME, user)
        _ = ccurl_easy_setopt_string(handle, CURLOPT_PASSWORD, password)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_HTTPAUTH, schemes.rawValue)
    }

    /// An HTTP proxy ("host:port"; nil: none, whatever the environment says), and user and
    /// password for it.
    package func setProxy(_ proxy: String?, user: String?, password: String?, schemes: AuthSchemes) {
        _ = ccurl_easy_setopt_string(handle, CURLOPT_PROXY, proxy.map { "http://\($0)" } ?? "")
        _ = ccurl_easy_setopt_string(handle, CURLOPT_PROXYUSERNAME, user)
        _ = ccurl_easy_setopt_string(handle, CURLOPT_PROXYPASSWORD, password)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_PROXYAUTH, schemes.rawValue)
    }

    /// Follow 3xx Location headers, at most `maximum` times (then `.tooManyRedirects`).
    package func setFollowsRedirects(_ on: Bool, maximum: Int) {
        _ = ccurl_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, on ? 1 : 0)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_MAXREDIRS, max(0, maximum))
    }

    /// The request body's length; nil (the default) means unknown, sent chunked.
    package func setUploadSize(_ size: Int64?) {
        uploadSize = size.map { max(0, $0) }
    }

    /// nil leaves libcurl's default (no low-speed check; 300 s to connect).
    /// The low-speed check ends a transfer that moved fewer than `bytesPerSecond` for
    /// `lowSpeedTime` seconds; libcurl does not count time while receiving is paused.
    package func setTimeouts(connect: Double?, lowSpeedLimit bytesPerSecond: Int?, lowSpeedTime: Double?) {
        // Whatever the numbers (NaN, infinity, 1e300), libcurl gets a long: never a trap.
        let connectMilliseconds = connect.map { CheckedNumbers.wholeSeconds($0 * 1000) } ?? 0
        _ = ccurl_easy_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, connectMilliseconds)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, max(0, bytesPerSecond ?? 0))
        let seconds = lowSpeedTime.map { CheckedNumbers.wholeSeconds($0) } ?? 0
        _ = ccurl_easy_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, seconds)
    }

    /// The largest chunk handed to `onBody` / asked from `onUploadRead`.
    /// libcurl clamps it (receive 1 KiB...10 MiB, send 16 KiB...2 MiB).
    package func setBufferSize(_ bytes: Int) {
        _ = ccurl_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, bytes)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, bytes)
    }

    // MARK: Pausing

    /// Sets the whole pause state: `receiving` stops body delivery, `sending` stops upload reads.
    /// (pause(receiving: false, sending: false) is `resume()`.)
    package func pause(receiving: Bool, sending: Bool) {
        let bits = (receiving ? CCURL_PAUSE_RECV : 0) | (sending ? CCURL_PAUSE_SEND : 0)
        setPauseState(bits)
    }

    /// Lifts every pause, including one asked for by returning `.pause` from a callback.
    ///
    /// Re-entrancy: libcurl delivers bytes it kept while paused *synchronously, inside this
    /// call*, so `onBody` may run (and may pause again) before `resume()` returns. Everything
    /// else continues on the next `CurlMulti.perform()`; libcurl makes the next `poll` return
    /// at once for that. Do not call it from inside this handle's own callbacks.
    package func resume() {
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

    // MARK: Results (valid once the transfer completed; some also during it)

    /// The last response's status code; 0 before one arrived.
    package var responseCode: Int {
        Int(getLong(CURLINFO_RESPONSE_CODE) ?? 0)
    }

    /// The URL of the last request (differs from the set one after redirects).
    package var effectiveURL: String? {
        getString(CURLINFO_EFFECTIVE_URL)
    }

    /// The last response's Content-Length; nil when it had none.
    package var contentLengthDownload: Int64? {
        guard let length = getOffset(CURLINFO_CONTENT_LENGTH_DOWNLOAD_T), length >= 0 else { return nil }
        return length
    }

    /// The last response's Content-Type header value, if any.
    package var contentType: String? {
        getString(CURLINFO_CONTENT_TYPE)
    }

    /// How many redirects were followed.
    package var redirectCount: Int {
        Int(getLong(CURLINFO_REDIRECT_COUNT) ?? 0)
    }

    /// The IP address and port of the last connection used.
    package var primaryIP: String? {
        getString(CURLINFO_PRIMARY_IP)
    }

    package var primaryPort: Int? {
        getLong(CURLINFO_PRIMARY_PORT)
    }

    /// Body bytes received (of the last response, after transfer decoding such as chunked).
    package var bytesReceived: Int64 {
        getOffset(CURLINFO_SIZE_DOWNLOAD_T) ?? 0
    }

    /// Body bytes sent.
    package var bytesSent: Int64 {
        getOffset(CURLINFO_SIZE_UPLOAD_T) ?? 0
    }

    /// Seconds the whole exchange took (including redirects).
    package var totalTime: Double {
        var value = 0.0
        return ccurl_easy_getinfo_double(handle, CURLINFO_TOTAL_TIME, &value) == CURLE_OK ? value : 0
    }

    // MARK: For CurlMulti

    /// Applies method and body options and clears the state of a previous run.
    /// Called by `CurlMulti.add` right before `curl_multi_add_handle`.
    package func prepareForTransfer() throws(CurlError) {
        errorBuffer[0] = 0
        callbackAborted = false
        pendingFailure = nil
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
        if code == CURLE_OK.rawValue && !callbackAborted && pendingFailure == nil {
            return .success(())
        }
        // A failure from resume() is the real cause; libcurl only reports our progress abort.
        let cause = pendingFailure ?? code
        let detail = pendingFailure == nil ? String(cString: errorBuffer) : nil
        if pendingFailure == nil, !callbackAborted,
           code == CURLE_PEER_FAILED_VERIFICATION.rawValue || code == CURLE_SSL_CONNECT_ERROR.rawValue {
            return .failure(CurlError(tlsCode: code, verifyResult: sslVerifyResult, detail: detail))
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

    fileprivate func deliverBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if callbackAborted { return 0 }
        guard bytes.count > 0, let onBody else { return bytes.count }
        onCallback?()
        switch onBody(bytes) {
        case .consumed:
            return bytes.count
        case .pause:
            return CCURL_WRITEFUNC_PAUSE
        case .abort:
            callbackAborted = true
            return 0  // anything but bytes.count makes libcurl stop with CURLE_WRITE_ERROR
        }
    }

    fileprivate func deliverHeader(_ bytes: UnsafeRawBufferPointer) {
        guard let onHeaderLine else { return }
        onCallback?()
        var line = bytes[...]
        while let last = line.last, last == 0x0A || last == 0x0D { line = line.dropLast() }
        onHeaderLine(decodeHeaderLine(UnsafeRawBufferPointer(rebasing: line)))
    }

    fileprivate func readUpload(into buffer: UnsafeMutableRawBufferPointer) -> Int {
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
            return CCURL_READFUNC_PAUSE
        case .abort:
            callbackAborted = true
            return CCURL_READFUNC_ABORT
        }
    }

    fileprivate func seekUpload(to offset: Int64) -> Int32 {
        guard let onUploadSeek else { return CCURL_SEEKFUNC_CANTSEEK }
        return onUploadSeek(offset) ? CCURL_SEEKFUNC_OK : CCURL_SEEKFUNC_FAIL
    }

    fileprivate func reportProgress(downloaded: Int64, downloadTotal: Int64,
                                    uploaded: Int64, uploadTotal: Int64) -> Int32 {
        if pendingFailure != nil || callbackAborted { return 1 }
        guard let onProgress else { return 0 }
        if onProgress(downloaded, downloadTotal, uploaded, uploadTotal) { return 0 }
        callbackAborted = true
        return 1
    }

    // MARK: Helpers

    private func check(_ code: CURLcode) throws(CurlError) {
        guard code == CURLE_OK else {
            throw CurlError(transferCode: code.rawValue, detail: String(cString: errorBuffer))
        }
    }

    func getLong(_ info: CURLINFO) -> Int? {
        var value = 0
        return ccurl_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : nil
    }

    private func getOffset(_ info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return ccurl_easy_getinfo_off_t(handle, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    func getString(_ info: CURLINFO) -> String? {
        var value: UnsafePointer<CChar>? = nil
        guard ccurl_easy_getinfo_string(handle, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }
}

/// Header bytes as text: UTF-8 when valid, otherwise ISO-8859-1 (HTTP's historical charset),
/// so no byte is ever lost or replaced.
private func decodeHeaderLine(_ bytes: UnsafeRawBufferPointer) -> String {
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
}

/// Runs curl_global_init once per process, before the first easy or multi handle is made.
/// (Swift runs a global's initializer exactly once, thread-safely.)
func ensureCurlGlobalInit() throws(CurlError) {
    guard curlGlobalInitCode == CURLE_OK.rawValue else {
        throw CurlError(transferCode: curlGlobalInitCode)
    }
}

private let curlGlobalInitCode: UInt32 = curl_global_init(CCURL_GLOBAL_ALL).rawValue

// MARK: - C trampolines
// libcurl calls these with the CurlEasy as an unretained pointer (set in init). The object is
// alive whenever libcurl can call back: a CurlMulti retains the handles it holds, and
// resume()/pause() run on the object itself. They never throw or unwind into C.

private func curlWriteTrampoline(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.deliverBody(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size * count))
}

private func curlHeaderTrampoline(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let total = data == nil ? 0 : size * count
    guard let context else { return total }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    easy.deliverHeader(UnsafeRawBufferPointer(start: data, count: total))
    return total
}

private func curlReadTrampoline(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return CCURL_READFUNC_ABORT }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.readUpload(into: UnsafeMutableRawBufferPointer(start: buffer, count: buffer == nil ? 0 : size * count))
}

private func curlSeekTrampoline(
    _ context: UnsafeMutableRawPointer?, _ offset: curl_off_t, _ origin: Int32
) -> Int32 {
    guard let context, origin == SEEK_SET else { return CCURL_SEEKFUNC_CANTSEEK }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.seekUpload(to: Int64(offset))
}

private func curlProgressTrampoline(
    _ context: UnsafeMutableRawPointer?, _ downloadTotal: curl_off_t, _ downloaded: curl_off_t,
    _ uploadTotal: curl_off_t, _ uploaded: curl_off_t
) -> Int32 {
    guard let context else { return 0 }
    let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
    return easy.reportProgress(downloaded: Int64(downloaded), downloadTotal: Int64(downloadTotal),
                               uploaded: Int64(uploaded), uploadTotal: Int64(uploadTotal))
}
