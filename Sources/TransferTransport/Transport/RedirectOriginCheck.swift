import Foundation

/// Watches the response header lines of an exchange whose server is trusted only through the
/// key the app accepted for it (`TLSPolicy.acceptedPublicKeyPin`), and stops it at a redirect
/// to another origin: libcurl applies a pin to every connection of a transfer, so following
/// would trust another server that presents the same key without the app being asked about
/// it (S3.6). That server is judged on its own (`CurlError.Kind.redirectFromAcceptedKey`).
/// Owned by its `CurlEasy`, on that handle's thread.
struct RedirectOriginCheck {
    private var status = 0
    private var location: String?
    /// The absolute URL of the other origin a redirect would have led to.
    private(set) var refused: String?

    /// Takes one header line (without CRLF) of the response from `currentURL`; true at the
    /// empty line ending a 3xx whose `Location` leads to another scheme, host or port.
    mutating func refuses(after line: String, currentURL: String?) -> Bool {
        if line.hasPrefix("HTTP/") {
            let fields = line.split(separator: " ", maxSplits: 2)
            status = fields.count > 1 ? Int(fields[1]) ?? 0 : 0
            location = nil
        } else if line.lowercased().hasPrefix("location:") {
            location = String(line.dropFirst("location:".count)).trimmingCharacters(in: .whitespaces)
        } else if line.isEmpty, (300..<400).contains(status), status != 304, let location {
            guard let base = currentURL.flatMap({ URL(string: $0) }), let target = URL(string: location, relativeTo: base)?.absoluteURL else {
                refused = location // not understood: not followed under the key either
                return true
            }
            if Self.origin(of: target) != Self.origin(of: base) { refused = target.absoluteString }
        }
        return refused != nil
    }

    /// Scheme, host and port (the scheme's default when none is given), lowercased.
    private static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }
}
