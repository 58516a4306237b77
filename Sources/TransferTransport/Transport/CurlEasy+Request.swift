internal import CCurl
import Foundation
import TransferContainer

/// The request a `CurlEasy` sends: URL, method, headers, range, credentials, proxy, redirects,
/// upload size and timeouts, each a typed `curl_easy_setopt`. On the handle's own thread.
extension CurlEasy {
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
        // Over https a transfer to an origin that already has a connection (or one being made)
        // waits to learn, from its TLS handshake, whether it can share it (HTTP/2) rather than
        // open another. Plain http is HTTP/1.1 here, one exchange a connection: waiting would
        // queue every transfer to the origin behind the one in progress, however slow.
        try check(ccurl_easy_setopt_long(handle, CURLOPT_PIPEWAIT, name == "https" ? 1 : 0))
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

    /// Sends `body` (held in memory) as the request body, with its length as Content-Length;
    /// libcurl may rewind it to send it again (a 307/308 redirect, a reused connection found dead).
    package func setBody(_ body: Data) {
        var offset = 0 // shared by both closures: where the next read starts
        setUploadSize(Int64(body.count))
        onUploadRead = { buffer in
            let count = min(buffer.count, body.count - offset)
            guard count > 0 else { return .bytes(0) }
            body.withUnsafeBytes { bytes in
                UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]).copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
            }
            offset += count
            return .bytes(count)
        }
        onUploadSeek = { position in
            guard position >= 0, position <= Int64(body.count) else { return false }
            offset = Int(position)
            return true
        }
    }

    /// Turns on libcurl's cookie engine for this handle, holding `lines` (Netscape's cookie
    /// file format): each request, redirects too, sends the cookies that match it, and the
    /// `Set-Cookie`s of responses on the way join them. Nothing is written to a file.
    package func loadCookieEngine(_ lines: [String]) {
        _ = ccurl_easy_setopt_string(handle, CURLOPT_COOKIEFILE, "")
        for line in lines { _ = ccurl_easy_setopt_string(handle, CURLOPT_COOKIELIST, line) }
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

    /// Apple's `timeoutIntervalForRequest`: the exchange fails with `.timedOut` once no byte
    /// has moved either way (request, response head, body) for longer than `seconds`; nil:
    /// no limit. Unlike libcurl's low-speed check, which averages over seconds in whole bytes
    /// per second and so cuts a link that sends a byte every few seconds, this counts only
    /// silence. Time while a transfer is paused on purpose does not count. Checked in the
    /// progress callback, i.e. each time the handle is driven (the daemon's loop turns at
    /// least every 0.25 s), so it fires within a turn of the limit.
    package func setIdleTimeout(_ seconds: Double?) {
        idleTimeout = seconds.flatMap { $0.isNaN || $0 <= 0 ? nil : $0 }
    }

    /// The largest chunk handed to `onBody` / asked from `onUploadRead`.
    /// libcurl clamps it (receive 1 KiB...10 MiB, send 16 KiB...2 MiB).
    package func setBufferSize(_ bytes: Int) {
        _ = ccurl_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, bytes)
        _ = ccurl_easy_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, bytes)
    }
}
