import Testing
import Foundation
@testable import TransferTransport

/// When an exchange under the app's accepted key stops at a redirect: only a 3xx whose
/// `Location` leaves the origin (scheme, host, port) of the URL it was sent to.
@Suite struct RedirectOriginCheckTests {
    /// The target refused after `lines` (a response from `from`), or nil.
    private func refused(_ lines: [String], from: String = "https://127.0.0.1:8443/a/b") -> String? {
        var check = RedirectOriginCheck()
        for line in lines where check.refuses(after: line, currentURL: from) { return check.refused }
        return nil
    }

    @Test("Within the origin: a relative Location, an absolute one, the default port spelled out, another case of the host")
    func sameOrigin() {
        #expect(refused(["HTTP/1.1 302 Found", "Location: /c", ""]) == nil)
        #expect(refused(["HTTP/2 301", "location: ../d?x=1", ""]) == nil)
        #expect(refused(["HTTP/1.1 307 Temporary Redirect", "Location: https://127.0.0.1:8443/e", ""]) == nil)
        #expect(refused(["HTTP/1.1 302 Found", "Location: https://EXAMPLE.org:443/x", ""], from: "https://example.org/a") == nil)
    }

    @Test("Another port, host or scheme is refused, with the absolute target")
    func anotherOrigin() {
        #expect(refused(["HTTP/1.1 302 Found", "Location: https://127.0.0.1:9443/f", ""]) == "https://127.0.0.1:9443/f")
        #expect(refused(["HTTP/2 308", "location: //other.example/g", ""]) == "https://other.example/g")
        #expect(refused(["HTTP/1.1 301 Moved Permanently", "Location: http://127.0.0.1:8443/h", ""]) == "http://127.0.0.1:8443/h")
    }

    @Test("Only at the end of a 3xx head with a Location: not a 304, not a 200 with a Location, not a 1xx before the answer")
    func onlyRedirects() {
        #expect(refused(["HTTP/1.1 304 Not Modified", "Location: https://other.example/", ""]) == nil)
        #expect(refused(["HTTP/1.1 201 Created", "Location: https://other.example/", ""]) == nil)
        #expect(refused(["HTTP/1.1 100 Continue", "", "HTTP/1.1 200 OK", "Content-Length: 1", ""]) == nil)
        #expect(refused(["HTTP/1.1 302 Found", "Location: https://other.example/"]) == nil, "not before the head ends")
        #expect(refused(["HTTP/1.1 302 Found", ""]) == nil, "no Location: libcurl follows nothing")
    }
}
