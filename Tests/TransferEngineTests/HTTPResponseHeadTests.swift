import Testing
@testable import TransferEngine

/// The response head as libcurl reports it, line by line: what the engine reads its status,
/// validator, ranges and headers from.
@Suite struct HTTPResponseHeadTests {
    private func head(_ lines: [String]) -> HTTPResponseHead {
        var head = HTTPResponseHead()
        for line in lines { head.consume(line) }
        return head
    }

    @Test("The last response counts: a redirect's or a 100's head is forgotten")
    func lastResponse() {
        let parsed = head(["HTTP/1.1 100 Continue", "", "HTTP/1.1 302 Found", "Location: /b", "", "HTTP/1.1 206 Partial Content",
                           "Content-Range: bytes 10-19/20", "ETag: \"v1\"", ""])
        #expect(parsed.statusCode == 206)
        #expect(parsed.isComplete)
        #expect(parsed.value("Location") == nil)
        #expect(parsed.contentRangeStart == 10 && parsed.contentRangeTotal == 20)
        #expect(parsed.validator?.entityTag == "\"v1\"")
    }

    @Test("Names and values lose surrounding blanks; names match whatever their case; later fields win and join")
    func fields() {
        let parsed = head(["HTTP/1.1 200 OK", "content-length:\t 16384 ", "  X-Tag : a", "x-tag: b", "Empty:", "no colon here"])
        #expect(parsed.contentLength == 16384)
        #expect(parsed.value("X-TAG") == "b")
        #expect(parsed.headerDictionary["X-Tag"] == "a" && parsed.headerDictionary["x-tag"] == "b")
        #expect(parsed.value("Empty") == "")
        #expect(parsed.value("no colon here") == nil)
        #expect(!parsed.isComplete)
    }

    @Test("Only ASCII letters fold: names that differ in another byte do not match")
    func foldingIsForLettersOnly() {
        let parsed = head(["HTTP/1.1 200 OK", "X-A@: 1", "Ünïcode: 2"])
        #expect(parsed.value("x-a@") == "1")
        #expect(parsed.value("X-A`") == nil)
        #expect(parsed.value("Ünïcode") == "2")
    }

    @Test("A status line without a number gives status 0")
    func badStatus() {
        #expect(head(["HTTP/1.1"]).statusCode == 0)
        #expect(head(["HTTP/1.1 abc Nope"]).statusCode == 0)
    }
}
