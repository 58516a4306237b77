import Foundation
import FoundationNetworking
import TransferContainer

/// The decoded bytes of one response body whose server sent a `Content-Encoding`, counted
/// against what a decoder may produce of it (`TransferLimits.decodedBodyBound`): corelibs'
/// libcurl inflates such a body as it arrives, and a 1 MB gzip bomb would otherwise become
/// 1 GB in the app. A value owned by `ForegroundBridge`'s lock.
struct DecodedBodyCount {
    private let encodedLength: Int64?
    private let url: String
    private var bytes: Int64 = 0
    /// The bound was passed: the task is ending with -1103.
    private(set) var isOver = false

    /// A count for `response`'s body; nil when it is not encoded (no `Content-Encoding`, or `identity`).
    init?(of response: URLResponse?) {
        guard let http = response as? HTTPURLResponse,
              let coding = http.value(forHTTPHeaderField: "Content-Encoding")?.trimmingCharacters(in: .whitespaces),
              !coding.isEmpty, coding.lowercased() != "identity" else { return nil }
        // What corelibs gives as the expected length is the server's Content-Length: the encoded bytes.
        encodedLength = http.expectedContentLength >= 0 ? http.expectedContentLength : nil
        url = http.url?.absoluteString ?? ""
    }

    /// Counts `count` more decoded bytes; the failure to end the task with once past the bound.
    mutating func add(_ count: Int) -> TransferFailure? {
        bytes += Int64(count)
        guard let failure = TransferLimits.refusal(ofDecodedBytes: bytes, encodedLength: encodedLength, url: url) else {
            return nil
        }
        isOver = true
        return failure
    }
}
