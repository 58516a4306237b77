import Foundation
import Glibc

/// Fault: a resource that changes while a client downloads it, on a server that ignores
/// `If-Range`. The first response is the old version, interrupted after `cutAfterBytes`
/// body bytes; every later one is the new version, and a `Range` gets a `206` of the new
/// version whatever validator `If-Range` names — what a careless server or cache answers a
/// client that resumes. Set as `RouteOptions.versionChange`; the route's own content and
/// body faults are then not used. Shared by the connection threads that serve the route;
/// the count of responses is behind a lock.
public final class VersionChange: @unchecked Sendable {
    /// The validators each version's responses carry.
    public enum Validators: Sendable {
        /// `ETag: "v1"`, then `ETag: "v2"`.
        case entityTags
        /// `ETag: "v1"`, then no validator at all.
        case entityTagThenNone
        /// `Last-Modified` only, the new version's an hour after the old one's.
        case lastModified
    }

    /// How the first response stops.
    public enum Interruption: Sendable {
        /// The connection is closed after the bytes (a short body).
        case drop
        /// Nothing more is sent, the connection stays open (until the client gives up).
        case stall
    }

    /// The version the first response serves (cut short).
    public let old: Data
    /// The version every later response serves.
    public let new: Data
    private let validators: Validators
    private let cutAfterBytes: Int64
    private let interruption: Interruption
    /// The old version's date: a fixed past second, so that `If-Range` can name it.
    private let oldDate = Int(time(nil)) - 7200
    private let lock = NSLock()
    private var served = 0

    /// A change from `old` to `new`: the first response is cut after `cutAfterBytes` body
    /// bytes, as `interruption` says.
    public init(old: Data, new: Data, validators: Validators, cutAfterBytes: Int64, interruption: Interruption = .drop) {
        self.old = old
        self.new = new
        self.validators = validators
        self.cutAfterBytes = cutAfterBytes
        self.interruption = interruption
    }

    /// Responses given so far (the first is the old version's).
    public var responses: Int {
        lock.lock()
        defer { lock.unlock() }
        return served
    }

    /// The content of the next response; sets `options`' body faults for it.
    func next(_ options: inout RouteOptions) -> Representation {
        lock.lock()
        let first = served == 0
        served += 1
        lock.unlock()
        options.dropAfterBytes = first && interruption == .drop ? cutAfterBytes : nil
        options.stallAfterBytes = first && interruption == .stall ? cutAfterBytes : nil
        let body = first ? old : new
        let etag: String?
        let date: Int?
        switch validators {
        case .entityTags: (etag, date) = (first ? "\"v1\"" : "\"v2\"", nil)
        case .entityTagThenNone: (etag, date) = (first ? "\"v1\"" : nil, nil)
        case .lastModified: (etag, date) = (nil, first ? oldDate : oldDate + 3600)
        }
        return Representation(body: .data(body), size: Int64(body.count), etag: etag, lastModified: date)
    }
}
