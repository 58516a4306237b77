import Foundation
import Digests

/// One resumable upload, from its creation request until it is cancelled (completed ones
/// stay, so late requests learn it is complete). Lives in `UploadRegistry` under the server
/// lock. A connection reading a body for it attaches to it and takes the hash with it; the
/// offset and hash are written back when the body ends for any reason, so what arrived
/// before a dropped connection counts.
struct ResumableUpload {
    /// `/.uploads/<token>`
    let resumePath: String
    /// `http://127.0.0.1:PORT/.uploads/<token>`
    let location: String
    /// The upload route it was created on.
    let routePath: String
    /// The creation request's method and header fields.
    let method: String
    let headers: HTTPHeaders
    /// Versions the route spoke when the upload was created (used if the route is removed).
    let versions: Set<Int>
    /// Status of the final answer, fixed at creation.
    let finalStatus: Int
    /// Where the bytes go (`.file` storage), created with the upload.
    let file: URL?
    /// Bytes received so far.
    var offset: Int64 = 0
    /// Known total length (`Upload-Length`, or offset plus Content-Length of a request that
    /// said it completes the upload); later requests must agree with it.
    var uploadLength: Int64?
    var complete = false
    /// Nil with `.countOnly`, and while a connection has it.
    var hasher: SHA256?
    /// The hex digest, once complete.
    var sha256: String?
    /// The connection reading a body for it right now, if any.
    var attachedConnection: Int?
    var requestCount = 0

    /// Records the total length a request implies, NIOResumableUpload's way: a request that
    /// completes the upload fixes it at offset + its Content-Length; `Upload-Length` states it.
    /// False when either disagrees with what is already known (the request gets 409).
    mutating func agreeOnLength(complete: Bool, contentLength: Int64?, uploadLength declared: Int64?) -> Bool {
        let implied = complete ? contentLength.map { offset + $0 } : nil
        for candidate in [implied, declared] {
            guard let candidate else { continue }
            if let known = uploadLength, known != candidate { return false }
            uploadLength = candidate
        }
        return true
    }
}
