/// The refusals a client library tells apart by their reason, not by their words: each is
/// a `requestRefused` failure carrying its `Refusal`.
extension TransferFailure {
    public enum Refusal: String, Codable, Sendable {
        /// The session the request names is not held by the asking connection: a daemon that
        /// restarted has not seen the session reopened yet, so the library reopens it and asks again.
        case sessionNotOpen
    }

    /// The session `identifier` is not open in the asking process.
    public static func sessionNotOpen(_ identifier: String) -> TransferFailure {
        var failure = TransferFailure(code: requestRefused, message: "session \(identifier) is not open in this process", subject: identifier)
        failure.refusal = .sessionNotOpen
        return failure
    }
}
