import Foundation
import StandInSupport
import Testing

@Suite("DownloadsFolder.fileName")
struct DownloadsFolderTests {
    let url = URL(string: "http://127.0.0.1:8080/files/report.pdf")!

    /// What a safe name looks like: one path component that is not hidden, not "." or "..".
    func checkSafe(_ name: String, _ comment: Comment? = nil) {
        #expect(!name.isEmpty, comment)
        #expect(!name.contains("/"), comment)
        #expect(!name.contains("\\"), comment)
        #expect(!name.hasPrefix("."), comment)
        #expect(name != "." && name != "..", comment)
        #expect(name.utf8.count <= 200, comment)
        #expect(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, comment)
    }

    @Test("a suggested name cannot climb out of the folder", arguments: ["../../etc/passwd", "..\\..\\etc\\passwd", "a/../../passwd", "/../passwd"])
    func traversal(_ suggested: String) {
        let name = DownloadsFolder.fileName(suggested: suggested, url: url)
        checkSafe(name)
        #expect(name == "passwd")
    }

    @Test("an absolute suggested path keeps only its last component")
    func absolute() {
        #expect(DownloadsFolder.fileName(suggested: "/abs/x.txt", url: url) == "x.txt")
    }

    @Test("a plain suggested name is kept as it is")
    func plain() {
        #expect(DownloadsFolder.fileName(suggested: "Quarterly Report (final).pdf", url: url) == "Quarterly Report (final).pdf")
        #expect(DownloadsFolder.fileName(suggested: "naïve–résumé.txt", url: nil) == "naïve–résumé.txt")
    }

    @Test("without a suggestion the URL's last path component is used")
    func fromURL() {
        #expect(DownloadsFolder.fileName(suggested: nil, url: url) == "report.pdf")
        #expect(DownloadsFolder.fileName(suggested: nil, url: URL(string: "http://h/a/b%20c.zip?x=1")!) == "b c.zip")
    }

    @Test("hidden names lose their leading dots")
    func leadingDots() {
        #expect(DownloadsFolder.fileName(suggested: ".bashrc", url: nil) == "bashrc")
        #expect(DownloadsFolder.fileName(suggested: "...config", url: nil) == "config")
    }

    @Test("an empty, \".\" or \"..\" result falls back to \"download\"", arguments: ["", ".", "..", "...", "/", "//", "../", "   ", "\u{1}\u{2}"])
    func fallback(_ suggested: String) {
        #expect(DownloadsFolder.fileName(suggested: suggested, url: nil) == "download")
        #expect(DownloadsFolder.fileName(suggested: suggested, url: URL(string: "http://h/")!) == "download")
        #expect(DownloadsFolder.fileName(suggested: nil, url: nil) == "download")
    }

    @Test("an unusable suggestion falls back to the URL's name")
    func fallbackToURL() {
        #expect(DownloadsFolder.fileName(suggested: "..", url: url) == "report.pdf")
        #expect(DownloadsFolder.fileName(suggested: "", url: url) == "report.pdf")
    }

    @Test("control characters are removed")
    func controlCharacters() {
        let name = DownloadsFolder.fileName(suggested: "re\u{0}port\u{1B}[31m\u{7F}\n.txt\r", url: nil)
        #expect(name == "report[31m.txt")
        checkSafe(name)
    }

    @Test("C1 control characters (U+0080–U+009F) are removed too")
    func c1ControlCharacters() {
        let name = DownloadsFolder.fileName(suggested: "a\u{85}b\u{9B}c.txt", url: nil)
        #expect(name == "abc.txt")

    }

    @Test("a very long ASCII name is cut to at most 200 bytes")
    func longASCII() {
        let name = DownloadsFolder.fileName(suggested: String(repeating: "x", count: 1000) + ".bin", url: nil)
        #expect(name.utf8.count <= 200)
        #expect(name.utf8.count >= 100)
        checkSafe(name)
    }

    @Test("a very long non-ASCII name is cut to at most 200 bytes", arguments: ["é", "日", "😀"])
    func longNonASCII(_ character: String) {
        let name = DownloadsFolder.fileName(suggested: String(repeating: character, count: 300), url: nil)
        #expect(name.utf8.count <= 200, "\(name.utf8.count) bytes")

        #expect(!name.isEmpty)
    }

    @Test("a name that starts with blanks then dots is neither hidden nor \".\"/\"..\"", arguments: [" .", " ..", " .hidden", "  ..  "])
    func blanksThenDots(_ suggested: String) {
        let name = DownloadsFolder.fileName(suggested: suggested, url: nil)
        #expect(!name.hasPrefix("."), "\"\(suggested)\" → \"\(name)\"")
        #expect(name != "." && name != "..", "\"\(suggested)\" → \"\(name)\"")

    }

    // MARK: Names that come from the URL (no suggestion from the server)

    @Test("a URL's last path component is sanitised like a suggestion", arguments: [
        ("http://h/.hidden", "hidden"),
        ("http://h/%2E%2Ehidden", "hidden"),
        ("http://h/a/..", "download"),
        ("http://h/a/.", "download"),
        ("http://h/", "download"),
        ("http://h", "download"),
        ("http://h/%2F", "download"),
        ("http://h/a%2F..%2F..%2Fetc%2Fpasswd", "passwd"),
        ("http://h/a%5C..%5Cb.txt", "b.txt"),
        ("http://h/x%00y%0A%1Bz%7F.txt", "xyz.txt"),
        ("http://h/%C2%85%C2%9Breport.txt", "report.txt"),
        ("http://h/files/dir/", "dir"),
    ])
    func fromHostileURL(_ url: String, _ expected: String) throws {
        let name = DownloadsFolder.fileName(suggested: nil, url: try #require(URL(string: url)))
        #expect(name == expected, "\(url) → \"\(name)\"")
        checkSafe(name, "\(url)")
    }

    @Test("a 300-byte name in the URL is cut to at most 200 bytes on a character boundary")
    func longNameInURL() throws {
        let long = String(repeating: "n", count: 299) + "é" // 301 bytes, the last character two of them
        let url = try #require(URL(string: "http://h/" + (long.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "")))
        let name = DownloadsFolder.fileName(suggested: nil, url: url)
        #expect(name == String(repeating: "n", count: 200))
        checkSafe(name)
        let wide = DownloadsFolder.fileName(suggested: String(repeating: "n", count: 199) + "é", url: nil)
        #expect(wide == String(repeating: "n", count: 199), "a character is never cut in half: \(wide.utf8.count) bytes")
    }

    @Test("direction controls and invisible spaces are removed (a name cannot show another extension than it has); joiners stay")
    func formatCharacters() throws {
        #expect(DownloadsFolder.fileName(suggested: "👩\u{200D}💻 notes\u{200C}.txt", url: nil) == "👩\u{200D}💻 notes\u{200C}.txt")
        // "invoice\u{202E}fdp.exe" would show as "invoiceexe.pdf".
        #expect(DownloadsFolder.fileName(suggested: "invoice\u{202E}fdp.exe", url: nil) == "invoicefdp.exe")
        #expect(DownloadsFolder.fileName(suggested: nil, url: try #require(URL(string: "http://h/a%E2%80%8Bb%EF%BB%BF.txt"))) == "ab.txt")
        #expect(DownloadsFolder.fileName(suggested: "\u{200B}\u{2066}", url: nil) == "download")
    }
}
