import Foundation
import Testing
import ProgressDisplay

@Suite("ProgressLine: a bar fitted to the terminal")
struct ProgressLineTests {
    let line = ProgressLine(label: "report.bin", done: 1 << 29, expected: 1 << 30, bytesPerSecond: 47_815_065.6)

    @Test("the whole line: label, bar, bytes, rate, time left")
    func whole() {
        let text = line.render(width: 100)
        #expect(text == "report.bin [====================>                   ]  512.0 MiB / 1.0 GiB    45.6 MiB/s  ETA 0:12 ")
        #expect(text.count <= 100)
    }

    @Test("never wider than asked, whatever the width", arguments: Array(0...130))
    func fits(_ width: Int) {
        let long = ProgressLine(label: "com.example.host.fetch.background/12 a-rather-long-file-name.tar.gz", done: 123_456_789, expected: 987_654_321_000, bytesPerSecond: 1234.5)
        #expect(long.render(width: width).count <= width)
        #expect(line.render(width: width).count <= width)
    }

    @Test("the bar is as wide as the room, between 10 and 40")
    func barWidth() {
        func bar(_ text: String) -> Int? {
            guard let open = text.firstIndex(of: "["), let close = text.firstIndex(of: "]") else { return nil }
            return text.distance(from: open, to: close) - 1
        }
        #expect(bar(line.render(width: 200)) == 40)
        #expect(bar(line.render(width: 80)) == 80 - line.figures.count - 4 - "report.bin".count)
        // Too narrow for the whole label: it is shortened, the bar keeps its least width.
        var long = line
        long.label = "com.example.host.fetch.background/1 report.bin"
        let narrow = long.render(width: long.figures.count + 4 + 10 + 20)
        #expect(bar(narrow) == 10)
        #expect(narrow.hasPrefix("com.exampl…eport.bin [="))
        // Narrower still: no bar, the label shortened in the middle.
        let tight = line.render(width: line.figures.count + 8)
        #expect(bar(tight) == nil)
        #expect(tight == "rep…bin " + line.figures)
    }

    @Test("long labels lose their middle, not their ends")
    func shorten() {
        #expect(ProgressLine.shorten("com.example.host.fetch.background/1", to: 15) == "com.exa…round/1")
        #expect(ProgressLine.shorten("short", to: 15) == "short")
        #expect(ProgressLine.shorten("abc", to: 1) == "…")
        #expect(ProgressLine.shorten("abc", to: 0) == "")
    }

    @Test("labels are padded to a common column so that bars line up")
    func labelColumn() {
        let a = ProgressLine(label: "#1 a.bin", done: 0, expected: 10, bytesPerSecond: nil).render(width: 100, labelWidth: 20)
        let b = ProgressLine(label: "#22 longer-name.bin", done: 10, expected: 10, bytesPerSecond: nil).render(width: 100, labelWidth: 20)
        #expect(a.firstIndex(of: "[").map { a.distance(from: a.startIndex, to: $0) } == 21)
        #expect(b.firstIndex(of: "[").map { b.distance(from: b.startIndex, to: $0) } == 21)
    }

    @Test("bars: empty, partial, full, and blank when the size is unknown")
    func bars() {
        #expect(ProgressLine(label: "", done: 0, expected: 100, bytesPerSecond: nil).bar(width: 10) == ">         ")
        #expect(ProgressLine(label: "", done: 55, expected: 100, bytesPerSecond: nil).bar(width: 10) == "=====>    ")
        #expect(ProgressLine(label: "", done: 100, expected: 100, bytesPerSecond: nil).bar(width: 10) == "==========")
        #expect(ProgressLine(label: "", done: 150, expected: 100, bytesPerSecond: nil).bar(width: 10) == "==========")
        #expect(ProgressLine(label: "", done: 0, expected: 0, bytesPerSecond: nil).bar(width: 10) == "==========")
        #expect(ProgressLine(label: "", done: 500, expected: -1, bytesPerSecond: nil).bar(width: 10) == "          ")
    }

    @Test("the figures keep their width while the numbers change, so the bar does not jump")
    func steadyFigures() {
        let widths = [(Int64(900) << 10, 812.0), (1 << 20, 45_000_000.0), (5 << 20, 1_000_000.0), (1000 << 20, 999.0), (1023 << 10, 1_048_000.0)].map { done, rate in
            ProgressLine(label: "x", done: done, expected: 2 << 30, bytesPerSecond: rate).figures.count
        }
        #expect(Set(widths).count == 1, "\(widths)")
    }

    @Test("a waiting task says so instead of a rate, with no time left")
    func waiting() {
        let text = ProgressLine(label: "x", done: 5 << 20, expected: 10 << 20, bytesPerSecond: 1000, waiting: "waiting (retry 2)").figures
        #expect(text == "   5.0 MiB / 10.0 MiB  waiting (retry 2)  ETA --:--")
    }

    @Test("an unknown size: no time left", arguments: [nil, 1000.0])
    func unknownSize(_ rate: Double?) {
        #expect(ProgressLine(label: "x", done: 2048, expected: -1, bytesPerSecond: rate).figures.hasSuffix("ETA --:--"))
    }

    @Test("a task is called by its description, else its URL's last path component, else its host")
    func taskName() {
        #expect(ProgressLine.taskName(description: "Quarterly report", url: "http://h/files/r.pdf") == "Quarterly report")
        #expect(ProgressLine.taskName(description: nil, url: "http://h/files/r.pdf?x=1") == "r.pdf")
        #expect(ProgressLine.taskName(description: "", url: "http://example.org/") == "example.org")
        #expect(ProgressLine.taskName(description: nil, url: "not a url") == "not a url")
    }
}
