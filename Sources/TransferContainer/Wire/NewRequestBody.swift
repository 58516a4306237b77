import Foundation

/// The body of the request an app gives with `.useNewRequest` in `willBeginDelayedRequest`
/// (S5.1): a download task sends it from then on instead of the body it was created with. A
/// body the daemon cannot send travels as what it is, not as its bytes, so that the daemon
/// refuses it by the rule for a new task. A value; any thread.
public enum NewRequestBody: Codable, Sendable, Equatable {
    /// The new request has no body: none is sent.
    case absent
    /// Its `httpBody`, at most `TransferLimits.requestBodyBytes`.
    case bytes(Data)
    /// An `httpBody` of this many bytes, past `TransferLimits.requestBodyBytes` (the bytes
    /// stay in the app: they may not fit a frame).
    case tooLong(Int)
    /// An `httpBodyStream`: background sessions take bodies from a file.
    case stream

    /// Why a download task of `url` cannot send it (-1103 past the bound, -1 for a stream), as
    /// at creation; nil when it can.
    public func refusal(url: String) -> TransferFailure? {
        switch self {
        case .absent: nil
        case .bytes(let data): TransferLimits.refusal(ofBodyBytes: data.count, url: url)
        // Past the bound whatever count a client claims.
        case .tooLong(let count): TransferLimits.refusal(ofBodyBytes: max(count, TransferLimits.requestBodyBytes + 1), url: url)
        case .stream: TransferLimits.refusalOfBodyStream(url: url)
        }
    }
}
