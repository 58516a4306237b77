internal import CCurl
import Foundation

/// The request header lines of one `CurlEasy`, as the `curl_slist` libcurl reads them.
///
/// libcurl does not copy CURLOPT_HTTPHEADER; the list must live as long as the handle may use it,
/// so `CurlEasy` keeps its current list and frees it only after replacing it or after
/// `curl_easy_cleanup`. Owned by the same thread as its `CurlEasy`; not Sendable.
package final class CurlHeaderList {
    /// The `struct curl_slist *`, typed opaquely so no C type shows outside Transport.
    package let head: OpaquePointer?

    /// Builds the list from "Name: value" lines.
    ///
    /// Two libcurl conventions are handled so callers can pass plain HTTP header lines:
    /// - "Name:" with nothing after the colon would tell libcurl to *remove* a header; a
    ///   caller's empty value is sent as libcurl's "Name;" form instead.
    /// - Unless the caller set `Expect` themselves, "Expect:" is added, so uploads never wait
    ///   for a `100 Continue` (libcurl otherwise stalls up to a second for bodies over 1 MiB,
    ///   and URLSession does not send `Expect` either).
    ///
    /// Throws if a line has CR, LF or NUL (header injection) or has no colon.
    package init(lines: [String]) throws(CurlError) {
        var entries: [String] = []
        var sawExpect = false
        for line in lines {
            guard !line.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }),
                  let colon = line.firstIndex(of: ":")
            else {
                throw CurlError(kind: .other, origin: .transfer,
                                code: Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue),
                                message: "invalid header line: \(line.debugDescription)")
            }
            let name = line[..<colon]
            if name.lowercased() == "expect" { sawExpect = true }
            let value = line[line.index(after: colon)...]
            entries.append(value.allSatisfy({ $0 == " " || $0 == "\t" }) ? "\(name);" : line)
        }
        if !sawExpect { entries.append("Expect:") }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        for entry in entries {
            // curl_slist_append copies the string; NULL means out of memory (list unchanged).
            guard let extended = curl_slist_append(list, entry) else {
                curl_slist_free_all(list)
                throw CurlError(transferCode: CURLE_OUT_OF_MEMORY.rawValue)
            }
            list = extended
        }
        head = OpaquePointer(list)
    }

    deinit {
        curl_slist_free_all(UnsafeMutablePointer<curl_slist>(head))
    }
}
