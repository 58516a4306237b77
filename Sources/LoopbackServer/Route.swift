import Foundation
import Glibc

/// How one path is served: validators, range support, framing and injected faults.
/// A plain value, copied into the route table under the server lock.
public struct RouteOptions: Sendable {
    /// Which validator headers the route sends (and If-Range can match against).
    public enum Validators: Sendable, Equatable {
        /// ETag and Last-Modified.
        case etagAndLastModified
        /// Last-Modified only: If-Range then works by date alone.
        case lastModifiedOnly
        /// Neither: If-Range never matches, so resumption must restart.
        case none
    }

    /// The ETag to send. Nil: a strong tag derived from size and mtime (files) or a hash of
    /// the contents (data). A bare value is quoted; `W/"…"` makes it weak.
    public var etag: String?
    /// Which validators the route sends; see `Validators`.
    public var validators: Validators
    /// False: ignore Range, always answer 200 with the whole body, no `Accept-Ranges`.
    public var acceptsRanges: Bool
    /// Sent as `Content-Disposition: attachment; filename="…"`.
    public var suggestedFilename: String?
    /// Send the body chunked (`Transfer-Encoding: chunked`) with no `Content-Length`
    /// (to HTTP/1.0 clients: delimited by closing the connection).
    public var omitContentLength: Bool
    /// Answer this status with a small text body instead of the content (e.g. 404, 500, 503).
    public var status: Int?
    /// `Retry-After` seconds, sent with `status` (meant for 503 and 429).
    public var retryAfter: Int?
    /// Fault: close the connection after this many body bytes of each response, without
    /// finishing it (the client sees a short body, or no terminating chunk). Applies only
    /// when the response body is longer than that. A plain close (FIN), not a reset, so
    /// the client reliably receives every byte sent before it.
    public var dropAfterBytes: Int64?
    /// Fault: throttle each response body to about this many bytes per second.
    public var bytesPerSecond: Int?
    /// Fault, a link that stalls: send the head, then this many body bytes of each response
    /// (0: none at all), then nothing more, keeping the connection open until the client
    /// closes it or the server stops. Applies only when the body is longer than that, or, sent
    /// chunked (`omitContentLength`), as long: then every byte goes out and the last chunk is
    /// withheld, so the client holds the whole body but never learns that it ended.
    public var stallAfterBytes: Int64?
    /// Fault, a slow trickle: each response body goes out one byte at a time, one every
    /// this many seconds (the head at once, the first byte one interval after it). For
    /// links slower than `bytesPerSecond` can say (under 1 byte per second).
    public var trickleInterval: Double?
    /// Answer 302 with `Location` set to this path (or absolute URL).
    public var redirectTo: String?
    /// The `Content-Type` of the content (default `application/octet-stream`).
    public var contentType: String
    /// Random faults (503s and cut-off bodies) from a seeded generator.
    public var faults: FaultInjector?
    /// Fault: the content changes after the first response, and `If-Range` is ignored.
    public var versionChange: VersionChange?
    /// Header fields added to every response of the route (its redirect too), as given: a server that lies
    /// (`Retry-After: 99999999999999999999`, a `Content-Range` nobody asked for).
    public var extraHeaders: [(name: String, value: String)] = []
    /// Answer POST as GET, ignoring its body (a search API that answers with a file). A
    /// POST's `Range` is ignored (RFC 9110 §14.2: ranges are defined for GET only).
    public var answersPOST = false

    /// Options with the given values; the defaults serve the content plainly, with ranges
    /// and both validators.
    public init(etag: String? = nil,
                validators: Validators = .etagAndLastModified,
                acceptsRanges: Bool = true,
                suggestedFilename: String? = nil,
                omitContentLength: Bool = false,
                status: Int? = nil,
                retryAfter: Int? = nil,
                dropAfterBytes: Int64? = nil,
                bytesPerSecond: Int? = nil,
                stallAfterBytes: Int64? = nil,
                trickleInterval: Double? = nil,
                redirectTo: String? = nil,
                contentType: String = "application/octet-stream") {
        self.etag = etag
        self.validators = validators
        self.acceptsRanges = acceptsRanges
        self.suggestedFilename = suggestedFilename
        self.omitContentLength = omitContentLength
        self.status = status
        self.retryAfter = retryAfter
        self.dropAfterBytes = dropAfterBytes
        self.bytesPerSecond = bytesPerSecond
        self.stallAfterBytes = stallAfterBytes
        self.trickleInterval = trickleInterval
        self.redirectTo = redirectTo
        self.contentType = contentType
    }
}

/// What one path serves: where the bytes come from, plus its options. Immutable; lives in
/// the route table (guarded by the server lock) and is copied out for each request.
struct Route: Sendable {
    enum Source: Sendable {
        /// Streamed from the file, reopened for every request so its current size and mtime count.
        case file(URL)
        /// In memory; validators fixed when the route was added.
        case data(Data, etag: String, lastModified: Int)
    }

    let source: Source
    let options: RouteOptions

    static func file(_ url: URL, options: RouteOptions) -> Route {
        Route(source: .file(url), options: options)
    }

    static func data(_ data: Data, options: RouteOptions) -> Route {
        let etag = "\"\(String(data.count, radix: 16))-\(String(fnv1a(data), radix: 16))\""
        return Route(source: .data(data, etag: etag, lastModified: Int(time(nil))), options: options)
    }

    /// Opens the content for one response, or nil if a file route's file cannot be opened.
    func open() -> Representation? {
        switch source {
        case .data(let data, let etag, let lastModified):
            return Representation(body: .data(data), size: Int64(data.count),
                                  etag: validatorETag(derived: etag), lastModified: validatorDate(lastModified))
        case .file(let url):
            let fd = Glibc.open(url.path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            let file = OpenFile(fd: fd)
            var info = stat()
            guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            let nanoseconds = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            let etag = "\"\(String(info.st_size, radix: 16))-\(String(nanoseconds, radix: 16))\""
            return Representation(body: .file(file), size: Int64(info.st_size),
                                  etag: validatorETag(derived: etag),
                                  lastModified: validatorDate(Int(info.st_mtim.tv_sec)))
        }
    }

    private func validatorETag(derived: String) -> String? {
        guard options.validators == .etagAndLastModified else { return nil }
        guard let custom = options.etag else { return derived }
        return custom.hasPrefix("\"") || custom.hasPrefix("W/\"") ? custom : "\"\(custom)\""
    }

    private func validatorDate(_ seconds: Int) -> Int? {
        options.validators == .none ? nil : seconds
    }

    /// FNV-1a, 64 bit: a cheap content hash, enough to tell test payloads apart.
    private static func fnv1a(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { bytes in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
            return hash
        }
    }
}

/// The content of one response, as opened for it: body source, size and validators.
/// Owned by the connection thread for the length of one response.
struct Representation {
    enum Body {
        case data(Data)
        case file(OpenFile)
    }

    let body: Body
    let size: Int64
    let etag: String?
    /// Seconds since the epoch.
    let lastModified: Int?
}

/// A file descriptor opened for one response, closed when the response is done with it.
/// Owned by the connection thread.
final class OpenFile {
    let fd: Int32

    init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        Glibc.close(fd)
    }
}
