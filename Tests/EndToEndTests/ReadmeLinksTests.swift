import Foundation
import Testing

/// The README is a map: each of its relative links must lead somewhere. Links into a DocC
/// catalog are checked again against the built documentation by `DocumentationTests`.
@Suite
struct ReadmeLinksTests {
    /// The targets of the README's relative markdown links (`[text](target)`), without
    /// fragments; web addresses and in-page anchors are left out.
    static func relativeLinks(in markdown: String) -> [String] {
        var links: [String] = []
        var rest = markdown[...]
        while let start = rest.range(of: "](") {
            let tail = rest[start.upperBound...]
            guard let end = tail.firstIndex(of: ")") else { break }
            var target = String(tail[..<end])
            rest = tail[end...]
            if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
            if target.isEmpty || target.contains("://") || target.hasPrefix("mailto:") { continue }
            links.append(target)
        }
        return links
    }

    static func readme() throws -> String {
        try String(contentsOf: ReaderExampleTests.repository.appendingPathComponent("README.md"), encoding: .utf8)
    }

    @Test("Every relative link in the README names a file or folder of the repository")
    func linksResolve() throws {
        let links = Self.relativeLinks(in: try Self.readme())
        #expect(links.count >= 10, "only \(links.count) relative links found in README.md: \(links)")
        for link in links {
            let path = ReaderExampleTests.repository.appendingPathComponent(link).path
            #expect(FileManager.default.fileExists(atPath: path), "README.md links \(link), which does not exist")
        }
    }

    @Test("The link finder sees a broken link as broken, and leaves web addresses and anchors alone")
    func detectorWorks() {
        let sample = "[a](Sources/Nowhere.md) [b](https://example.com/x) [c](#section) [d](README.md#top)"
        #expect(Self.relativeLinks(in: sample) == ["Sources/Nowhere.md", "README.md"])
        let missing = ReaderExampleTests.repository.appendingPathComponent("Sources/Nowhere.md").path
        #expect(!FileManager.default.fileExists(atPath: missing))
    }
}
