import Testing
@testable import TransferContainer

/// Field names as the daemon and the records compare them: ASCII case aside, byte for byte.
@Suite struct HTTPFieldNameTests {
    @Test("Names match whatever their ASCII case; other bytes must be equal")
    func comparison() {
        #expect("Content-Range".isSameHTTPFieldName(as: "content-RANGE"))
        #expect(!"Content-Range".isSameHTTPFieldName(as: "Content-Rang"))
        #expect(!"X-A@".isSameHTTPFieldName(as: "X-A`")) // '@' and '`' differ in the case bit but are no letters
        #expect(!"X-[".isSameHTTPFieldName(as: "X-{"))
    }

    @Test("A response's header is found by any spelling of its name")
    func responseHeader() {
        let response = ResponseRecord(url: "http://127.0.0.1/a", statusCode: 200, headers: ["WWW-Authenticate": "Basic realm=\"r\"", "Accept-Ranges": "bytes"])
        #expect(response.header("www-authenticate") == "Basic realm=\"r\"")
        #expect(response.header("ACCEPT-RANGES") == "bytes")
        #expect(response.header("Accept-Range") == nil)
    }
}
