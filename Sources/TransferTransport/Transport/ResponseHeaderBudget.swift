internal import CCurl
import TransferContainer

/// Counts the header lines and bytes of each response an exchange receives, against
/// `TransferLimits`: past either, the exchange stops and fails with -1103
/// (`CurlError.Kind.dataLengthExceedsMaximum`), which is not retried: a bigger header block
/// is not network trouble. Owned by its `CurlEasy`, on that handle's thread.
struct ResponseHeaderBudget {
    private var lines = 0
    private var bytes = 0
    /// What was exceeded, for the error's message; nil while within bounds.
    private(set) var exceeded: String?

    /// Takes one raw header line (CRLF included); false once a bound is passed. A status line
    /// starts a new block (a 1xx or a redirect has its own).
    mutating func admits(_ line: UnsafeRawBufferPointer) -> Bool {
        if line.starts(with: "HTTP/".utf8) { lines = 0; bytes = 0 }
        lines += 1
        bytes += line.count
        if exceeded == nil, lines > TransferLimits.responseHeaderLines {
            exceeded = "more than \(TransferLimits.responseHeaderLines) response header lines"
        } else if exceeded == nil, bytes > TransferLimits.responseHeaderBytes {
            exceeded = "response headers over \(TransferLimits.responseHeaderBytes) bytes"
        }
        return exceeded == nil
    }

    /// The failure that ends the exchange, once a bound was passed.
    func failure(from url: String?) -> CurlError? {
        guard let exceeded else { return nil }
        return CurlError(kind: .dataLengthExceedsMaximum, origin: .transfer, code: Int(CURLE_WRITE_ERROR.rawValue),
                         message: "\(exceeded) from \(url ?? "the server")")
    }
}
