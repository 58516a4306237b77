/// The bounds on what one task's request and responses may hold, in one place (README
/// "Limits"), and the refusal of a request past them. Plain values, read from any thread.
public enum TransferLimits {
    /// Bytes of a task's URL. Far above what servers take (8 KiB is usual), and small enough
    /// that a refused URL never sits in the daemon's records or memory.
    public static let urlBytes = 64 * 1024
    /// Header fields of a task's request, and their bytes (names and values).
    public static let requestHeaderFields = 1_000
    public static let requestHeaderBytes = 256 * 1024
    /// Bytes of one response's header block (status line and every header line). Below
    /// libcurl's own 300 KB total, so our check, not a libcurl receive error, ends the
    /// exchange; libcurl refuses one line over 100 KB itself ("Out of memory").
    public static let responseHeaderBytes = 256 * 1024
    /// Lines in one response's header block.
    public static let responseHeaderLines = 1_000
    /// Bytes of a background download task's request body (`httpBody`): it travels to the
    /// daemon in the creation request (4 MiB frames, base64 in JSON) and is read whole for
    /// each attempt. Larger bodies belong in an upload from a file.
    public static let requestBodyBytes = 1 << 20

    /// Unfinished tasks one app may have, all its sessions together (`transferd
    /// --max-tasks-per-app` changes it): twice the 100,000 a session is shown to hold, so an
    /// app's queue fits, while one app cannot fill the daemon's memory for the others.
    public static let tasksPerApp = 200_000
    /// Bytes of task records and undelivered events one app may make the daemon hold, all its
    /// sessions together, as `HeldBytes` counts them (`transferd --max-bytes-per-app` changes
    /// it): room for `tasksPerApp` tasks of ordinary size, while one app's giant headers or
    /// URLs, or events it never acknowledges, cannot fill the daemon's memory for the others.
    public static let bytesPerApp = 256 << 20

    /// Bytes a decoder (`Content-Encoding` gzip, deflate, br…) may make of one response body
    /// in a data or upload task (FoundationNetworking decodes; the daemon's transport never
    /// does): 64 MiB, or `decodedBodyRatio` times the encoded body's `Content-Length` when that
    /// is more. A 1 MB gzip bomb inflates to 1 GB; ordinary text compresses 3–20 times.
    public static let decodedBodyBytes: Int64 = 64 << 20
    public static let decodedBodyRatio: Int64 = 64

    /// What a body encoded in `encodedLength` bytes (nil: not said) may decode to.
    public static func decodedBodyBound(encodedLength: Int64?) -> Int64 {
        guard let encodedLength, encodedLength > 0 else { return decodedBodyBytes }
        let (scaled, overflow) = encodedLength.multipliedReportingOverflow(by: decodedBodyRatio)
        return overflow ? Int64.max : max(decodedBodyBytes, scaled)
    }

    /// Why a decoded body of `count` bytes so far is cut off: -1103 past `decodedBodyBound`.
    public static func refusal(ofDecodedBytes count: Int64, encodedLength: Int64?, url: String) -> TransferFailure? {
        let bound = decodedBodyBound(encodedLength: encodedLength)
        guard count > bound else { return nil }
        let encoded = encodedLength.map { "\($0) encoded bytes" } ?? "a body of unknown length"
        let message = "the response body decodes to more than \(bound) bytes, the most a decoder may produce of "
            + "\(encoded) (64 MiB, or \(decodedBodyRatio) times the encoded length)"
        return TransferFailure(code: TransferFailure.dataLengthExceedsMaximum, message: message,
                               subject: String(url.prefix(100)))
    }

    /// Why `request` is refused at task creation: -1000 for a URL past `urlBytes`, -1103 for
    /// headers past theirs; nil within bounds.
    public static func refusal(of request: RequestRecord) -> TransferFailure? {
        let urlBytes = request.url.utf8.count
        if urlBytes > Self.urlBytes {
            return TransferFailure(code: TransferFailure.badURL,
                                   message: "the URL has \(urlBytes) bytes, more than the \(Self.urlBytes) a task may have",
                                   subject: String(request.url.prefix(100)))
        }
        let fields = request.headers.count
        let bytes = request.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
        if fields > requestHeaderFields || bytes > requestHeaderBytes {
            return TransferFailure(code: TransferFailure.dataLengthExceedsMaximum,
                                   message: "the request has \(fields) header fields of \(bytes) bytes, more than a task may have (\(requestHeaderFields) fields, \(requestHeaderBytes) bytes)",
                                   subject: String(request.url.prefix(100)))
        }
        return nil
    }

    /// Why a download task's request body of `count` bytes is refused: -1103 past
    /// `requestBodyBytes`, naming the bound; nil within it.
    public static func refusal(ofBodyBytes count: Int, url: String) -> TransferFailure? {
        guard count > requestBodyBytes else { return nil }
        return TransferFailure(code: TransferFailure.dataLengthExceedsMaximum,
                               message: "the request body has \(count) bytes, more than the \(requestBodyBytes) (1 MiB) a background download task may send: upload it from a file (uploadTask(with:fromFile:))",
                               subject: String(url.prefix(100)))
    }

    /// Why a background download task's `httpBodyStream` is refused (-1): background sessions
    /// take bodies from a file, as on Apple's systems.
    public static func refusalOfBodyStream(url: String) -> TransferFailure {
        TransferFailure(code: TransferFailure.unknown,
                        message: "a background session's download task cannot send an httpBodyStream: background sessions take bodies from a file (uploadTask(with:fromFile:)), or set httpBody (at most \(requestBodyBytes) bytes)", subject: url)
    }
}
