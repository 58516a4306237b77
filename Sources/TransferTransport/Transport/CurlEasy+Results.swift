internal import CCurl

/// What libcurl knows of a finished (or running) exchange: the `curl_easy_getinfo` values the
/// engine reads, typed. On the handle's own thread, like the rest of `CurlEasy`.
extension CurlEasy {
    // Valid once the transfer completed; some also during it.

    /// The last response's status code; 0 before one arrived.
    package var responseCode: Int {
        Int(getLong(CURLINFO_RESPONSE_CODE) ?? 0)
    }

    /// The URL of the last request (differs from the set one after redirects).
    /// The status a proxy answered `CONNECT` with (0: no tunnel was asked for).
    package var proxyConnectCode: Int {
        Int(getLong(CURLINFO_HTTP_CONNECTCODE) ?? 0)
    }

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

    // MARK: curl_easy_getinfo, typed

    func getLong(_ info: CURLINFO) -> Int? {
        var value = 0
        return ccurl_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : nil
    }

    func getOffset(_ info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return ccurl_easy_getinfo_off_t(handle, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    func getString(_ info: CURLINFO) -> String? {
        var value: UnsafePointer<CChar>? = nil
        guard ccurl_easy_getinfo_string(handle, info, &value) == CURLE_OK, let value else { return nil }
        return String(cString: value)
    }
}
