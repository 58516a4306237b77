import Testing
import Foundation
import TransferContainer
@testable import TransferTransport

/// A head made of `lines`, as libcurl reports them.
private func head(_ lines: [String]) -> HTTPResponseHead {
    var head = HTTPResponseHead()
    for line in lines { head.consume(line) }
    return head
}

/// The response head as libcurl reports it, line by line: what the engine reads its status,
/// validator, ranges and headers from.
@Suite struct HTTPResponseHeadTests {

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

/// Numbers a server sends are held to ranges (issue "hostile servers"): no header value traps.
@Suite struct HostileHeaderTests {

    @Test("Retry-After: digits of any length are seconds within the largest interval; dates count from now; anything else is nothing")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_700_000_000) // 2023-11-14
        #expect(RetryPolicy.retryAfterSeconds("120", now: now) == 120)
        #expect(RetryPolicy.retryAfterSeconds(" 0 ", now: now) == 0)
        #expect(RetryPolicy.retryAfterSeconds("99999999999999999999", now: now) == CheckedNumbers.intervals.upperBound)
        #expect(RetryPolicy.retryAfterSeconds(String(repeating: "9", count: 400), now: now) == CheckedNumbers.intervals.upperBound)
        for odd in ["-1", "1e400", "nan", "NaN", "inf", "", "0x10", "1.5", "+5", "٣"] {
            #expect(RetryPolicy.retryAfterSeconds(odd, now: now) == nil, "\(odd)")
        }
        #expect(RetryPolicy.retryAfterSeconds("Fri, 15 Jan 2027 08:00:00 GMT", now: now).map { $0 > 0 } == true)
        #expect(RetryPolicy.retryAfterSeconds("Thu, 01 Jan 1970 00:00:00 GMT", now: now) == 0, "a date in the past is now")
        #expect(RetryPolicy.retryAfterSeconds("Fri, 31 Dec 9999 23:59:59 GMT", now: now) == CheckedNumbers.intervals.upperBound)
        #expect(head(["HTTP/1.1 503 Service Unavailable", "Retry-After: 18446744073709551616", ""]).serverWait(now: now) == .serverAskedToWait(status: 503, seconds: CheckedNumbers.intervals.upperBound))
        #expect(head(["HTTP/1.1 200 OK", "Retry-After: 5", ""]).serverWait(now: now) == nil, "only a 503 or a 429 asks to wait")
    }

    @Test("Content-Length and Content-Range past Int64, negative or not numbers are unknown, never a trap")
    func lengthsAndRanges() {
        for value in ["9223372036854775808", "-1", "18446744073709551615", "1e3", "", "abc"] {
            let parsed = head(["HTTP/1.1 206 Partial Content", "Content-Length: \(value)", "Content-Range: bytes \(value)-5/\(value)", ""])
            #expect(parsed.contentLength == nil, "\(value)")
            #expect(parsed.contentRangeStart == nil && parsed.contentRangeTotal == nil, "\(value)")
        }
        #expect(head(["HTTP/1.1 200 OK", "Content-Length: 9223372036854775807", ""]).contentLength == nil, "past what a file can hold")
        #expect(head(["HTTP/99999999999999999999 200 OK", ""]).statusCode == 200)
        #expect(head(["HTTP/1.1 99999999999999999999 Odd", ""]).statusCode == 0)
    }

    @Test("Timeouts and whole seconds: NaN, infinities, negatives and 9.3e18 all become usable numbers")
    func timeouts() {
        #expect(CheckedNumbers.timeout(.nan, fallback: 60) == 60)
        #expect(CheckedNumbers.timeout(-1, fallback: 60) == 60)
        #expect(CheckedNumbers.timeout(0, fallback: 60) == 60)
        #expect(CheckedNumbers.timeout(.infinity, fallback: 60) == CheckedNumbers.intervals.upperBound)
        #expect(CheckedNumbers.timeout(.greatestFiniteMagnitude, fallback: 60) == CheckedNumbers.intervals.upperBound)
        #expect(CheckedNumbers.timeout(0.25, fallback: 60) == 0.25)
        #expect(CheckedNumbers.wholeSeconds(9.3e18) == Int.max)
        #expect(CheckedNumbers.wholeSeconds(.infinity) == Int.max)
        #expect(CheckedNumbers.wholeSeconds(.nan) == 0)
        #expect(CheckedNumbers.wholeSeconds(-5) == 0)
        #expect(CheckedNumbers.wholeSeconds(1.2) == 2)
        #expect(CheckedNumbers.priority(.nan) == 0.5 && CheckedNumbers.priority(7) == 1 && CheckedNumbers.priority(-.infinity) == 0)
    }
}
