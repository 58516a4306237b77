import Foundation

/// The errors FoundationNetworking ends a default session's task with, as Apple's sessions
/// report them. Corelibs reports a body cut short by the server (libcurl's "transfer closed
/// with … remaining to read") as -1, with libcurl's words; Apple's sessions, and this
/// library's own transport, report -1005 (`networkConnectionLost`). Pure functions.
enum ForegroundErrors {
    /// What libcurl says when the connection closed before the whole body came (a length
    /// not reached, or a chunked body not ended); libcurl has no other report of it that
    /// FoundationNetworking passes on.
    private static let cutShort = "transfer closed with "

    /// `error` as Apple's sessions would report it: the same error but for the cases above.
    static func apples(_ error: Error?) -> Error? {
        guard let error else { return nil }
        let reported = error as NSError
        guard reported.domain == NSURLErrorDomain, reported.code == URLError.unknown.rawValue,
              reported.localizedDescription.hasPrefix(cutShort) else { return error }
        var userInfo = reported.userInfo
        userInfo[NSLocalizedDescriptionKey] = "The network connection was lost (\(reported.localizedDescription))."
        return URLError(.networkConnectionLost, userInfo: userInfo)
    }
}
