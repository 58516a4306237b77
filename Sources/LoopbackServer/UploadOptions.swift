import Foundation

/// How an upload route treats request bodies: what is kept of the bytes, the final status,
/// resumable-upload support and injected faults. A plain value, copied into the upload
/// route table under the server lock; `acceptUploads(at:options:)` called again replaces it.
public struct UploadOptions: Sendable {
    /// What happens to the received bytes. Bodies are always streamed, never held whole.
    public enum Storage: Sendable, Equatable {
        /// Count them only: the cheapest sink, for throughput benchmarks.
        case countOnly
        /// Count them and compute their SHA-256 as they arrive (`SHA256`, by libcrypto: about
        /// 1.8 GB/s on this machine, in debug builds too).
        case hash
        /// Count, hash and write them to a new file in `directory` (named `upload-<UUID>.bin`).
        case file(directory: URL)
    }

    /// What is kept of the bytes (default `.hash`).
    public var storage: Storage
    /// Status of the final answer to a completed upload. Nil: 201 for PUT, 200 for POST.
    /// The body is always `{"bytes":N,"sha256":"hex"}` (no sha256 with `.countOnly`).
    public var responseStatus: Int?
    /// Interop versions of the IETF draft "Resumable Uploads for HTTP" to speak, as Apple's
    /// NIOResumableUpload does (3, 5 and 6 are implemented; others are treated as
    /// unsupported). Empty: a plain upload route that ignores the draft's headers.
    public var resumable: Set<Int>
    /// Fault: after exactly this many body bytes of a request that is longer, stop reading
    /// and close the connection (FIN, then a short drain so the close is not a reset).
    /// What arrived before stays received (a resumable upload keeps that offset).
    public var dropAfterBytes: Int64?
    /// With `dropAfterBytes`: true (default) drops only the first request that reaches the
    /// limit, then the route behaves normally; false drops every such request.
    public var dropOnce: Bool
    /// Fault: the next PATCH to one of this route's resumable uploads gets 409 with the true
    /// offset even when its offset is right, so the client has to ask for the offset again.
    /// One-shot; setting the options again re-arms it.
    public var conflictOnce: Bool
    /// Fault: read each body at about this many bytes per second.
    public var bytesPerSecond: Int?
    /// Fault: read (and discard) every upload body, then answer this status with a small text
    /// body instead (e.g. 500, or 503 with `retryAfter`). Offset queries and cancellations of
    /// resumable uploads are answered normally.
    public var status: Int?
    /// `Retry-After` seconds, sent with `status` (meant for 503 and 429).
    public var retryAfter: Int?

    /// Options with the given values; the defaults keep a hash of each body, answer 201 to
    /// a PUT and 200 to a POST, speak no resumable-upload draft and inject no fault.
    public init(storage: Storage = .hash,
                responseStatus: Int? = nil,
                resumable: Set<Int> = [],
                dropAfterBytes: Int64? = nil,
                dropOnce: Bool = true,
                conflictOnce: Bool = false,
                bytesPerSecond: Int? = nil,
                status: Int? = nil,
                retryAfter: Int? = nil) {
        self.storage = storage
        self.responseStatus = responseStatus
        self.resumable = resumable
        self.dropAfterBytes = dropAfterBytes
        self.dropOnce = dropOnce
        self.conflictOnce = conflictOnce
        self.bytesPerSecond = bytesPerSecond
        self.status = status
        self.retryAfter = retryAfter
    }

    /// The interop versions this route actually speaks.
    var interopVersions: Set<Int> {
        resumable.intersection(ResumableUploadProtocol.supportedVersions)
    }
}
