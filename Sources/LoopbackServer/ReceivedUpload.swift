import Foundation

/// One upload the server received completely, as `LoopbackServer.receivedUploads(at:)`
/// reports it. Added by the connection thread that read its last byte, before the final
/// response is written, so a client holding that response finds it here. Immutable.
public struct ReceivedUpload: Sendable {
    /// The method of the request that started it: `PUT` or `POST`.
    public let method: String
    /// The upload route's path (for resumable uploads too, not the resume path).
    public let path: String
    /// Body bytes received, over every request of a resumable upload.
    public let byteCount: Int64
    /// Lowercase hex SHA-256 of the bytes; nil with `.countOnly` storage.
    public let sha256: String?
    /// Where the bytes were written (`.file` storage).
    public let file: URL?
    /// The header fields of the request that started it.
    public let headers: HTTPHeaders
    /// Whether it was a resumable upload (started with the draft's headers).
    public let resumable: Bool
    /// The resumable upload's resume URL (what the 104 and `Location` carried).
    public let resumeURL: URL?
    /// How many requests carried its bytes: 1, plus one per PATCH that appended.
    public let requestCount: Int
    /// When its last byte was read.
    public let completed: Date

    /// The named header of the starting request, case-insensitively; nil when absent.
    public func header(_ name: String) -> String? {
        headers[name]
    }
}
