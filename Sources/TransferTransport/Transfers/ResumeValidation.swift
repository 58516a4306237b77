import TransferContainer

/// When a `206` may continue the bytes already on disk: only when the server shows the
/// validator the partial file was fetched under, compared strongly. A server that ignores
/// `If-Range` answers a changed resource with a `206` of the new version; appending it would
/// splice two versions into one file. A pure rule, used on the thread of its transfer.
package enum ResumeValidation {
    /// Whether a `206` carrying `answered` continues bytes fetched under `sent` (the
    /// validator whose `ifRangeValue` went as `If-Range`).
    ///
    /// - An `If-Range` entity tag matches only the identical strong tag: a weak tag
    ///   (`W/"…"`) or none at all is a different version (RFC 9110 §8.8.3.2, §13.1.5).
    /// - An `If-Range` date matches only the identical `Last-Modified`; none is a mismatch.
    /// - Nothing sent: nothing to compare with, so nothing is continued.
    package static func continues(sent: Validator?, answered: Validator?) -> Bool {
        guard let sent, let ifRange = sent.ifRangeValue else { return false }
        if let tag = sent.entityTag, ifRange == tag {
            guard let answeredTag = answered?.entityTag, !answeredTag.hasPrefix("W/") else { return false }
            return answeredTag == tag
        }
        guard let answeredDate = answered?.lastModified else { return false }
        return answeredDate == ifRange
    }
}
