import Foundation
import LoopbackServer
import TestPeers
import Testing

/// The API documentation as a reader meets it: built by `.ci/docs` with the toolchain's docc,
/// served over loopback, and rendered by chromium-headless-shell, which runs DocC's own
/// scripts. A reference docc cannot resolve, a page that renders as "not found", a link to a
/// page that was not built, or a file the browser asks for in vain fails the test.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct DocumentationTests {
    static let root = "/documentation/backgroundtransfer"

    @Test("The docs build without a warning, every page linked from the landing pages and the articles renders in chromium, with no broken link and no missing file, and the README's links into the catalogs name built pages")
    func docsRenderWithoutBrokenLinks() async throws {
        try await onOwnThread { try Self.checkTheBuiltDocs() }
    }

    /// Where `.ci/docs` puts each catalog's site, after `output`.
    static let siteSuffixes = ["BackgroundTransfer": "", "BackgroundTransferTesting": "-testing", "LoopbackServer": "-loopback"]

    /// The data file docc builds for the article or root page a repository path names
    /// (`Sources/M/M.docc/Name.md`); nil when the path is not such a page.
    static func builtPage(for link: String, output: URL) -> URL? {
        let parts = link.split(separator: "/").map(String.init)
        guard parts.count == 4, parts[0] == "Sources", parts[2] == parts[1] + ".docc", parts[3].hasSuffix(".md"),
              let suffix = siteSuffixes[parts[1]] else { return nil }
        let module = parts[1].lowercased(), name = String(parts[3].dropLast(3)).lowercased()
        let data = URL(fileURLWithPath: output.path + suffix).appendingPathComponent("data/documentation")
        return name == module ? data.appendingPathComponent("\(module).json") : data.appendingPathComponent("\(module)/\(name).json")
    }

    static func checkTheBuiltDocs() throws {
        try TimelineTests.requireBrowser()
        let container = try TestContainer()
        defer { container.tearDown() }
        let output = container.parent.appendingPathComponent("docs")
        let build = try Executable(name: "bash", path: "/bin/bash").start(
            [ReaderExampleTests.repository.appendingPathComponent(".ci/docs").path, "--no-build", output.path], in: container, passContainer: false).wait(timeout: 180)
        try #require(build.status == 0, "docs did not build: \(build.stderr.suffix(3000))")
        // docc warns, and renders plain text, for every reference it cannot resolve.
        let warnings = (build.stdout + build.stderr).split(separator: "\n").filter { $0.contains("warning:") }
        #expect(warnings.isEmpty, "docc: \(warnings.joined(separator: "\n"))")

        let site = try DocumentationSite(output, root: root)
        defer { site.stop() }
        // The detector itself: a page that was never built is seen as not found.
        #expect(try site.render("\(root)/no-such-page").isNotFound)
        let pages = try site.crawl()
        #expect(pages >= 30, "only \(pages) pages of BackgroundTransfer were reached")

        // The testing library's catalog, beside it.
        let testing = try DocumentationSite(URL(fileURLWithPath: output.path + "-testing"), root: "/documentation/backgroundtransfertesting")
        defer { testing.stop() }
        let testingPages = try testing.crawl()
        #expect(testingPages >= 5, "only \(testingPages) pages of BackgroundTransferTesting were reached")
        #expect(testing.requestsForMissingFiles().isEmpty, "the browser asked for files that are not there: \(testing.requestsForMissingFiles())")

        // The loopback server's catalog, for adopters' tests.
        let loopback = try DocumentationSite(URL(fileURLWithPath: output.path + "-loopback"), root: "/documentation/loopbackserver")
        defer { loopback.stop() }
        let loopbackPages = try loopback.crawl()
        #expect(loopbackPages >= 10, "only \(loopbackPages) pages of LoopbackServer were reached")
        #expect(loopback.requestsForMissingFiles().isEmpty, "the browser asked for files that are not there: \(loopback.requestsForMissingFiles())")

        // The README's links into the catalogs name pages docc built.
        for link in try ReadmeLinksTests.relativeLinks(in: ReadmeLinksTests.readme()) where link.contains(".docc/") {
            let page = try #require(Self.builtPage(for: link, output: output), "README.md links \(link), which is not an article of a catalog")
            #expect(FileManager.default.fileExists(atPath: page.path), "README.md links \(link), but docc built no \(page.path)")
        }
        let missing = site.requestsForMissingFiles()
        #expect(missing.isEmpty, "the browser asked for files that are not there: \(missing)")
    }
}

/// The built documentation served by a loopback server, and read through chromium-headless-shell.
/// Owned by one test.
private final class DocumentationSite {
    /// A page as the browser left it once DocC's scripts had run.
    struct Page {
        let dom: String
        var isNotFound: Bool { dom.contains("page you’re looking for can’t be found") || dom.contains("page you're looking for can't be found") || !dom.contains("id=\"app\"") }
        var hasTitle: Bool { dom.contains("class=\"title\"") }
        /// The documentation pages it links to, without fragments.
        var documentationLinks: Set<String> {
            var links: Set<String> = []
            var rest = dom[...]
            while let start = rest.range(of: "href=\"/documentation/") {
                let tail = rest[start.upperBound...]
                guard let end = tail.firstIndex(of: "\"") else { break }
                var link = "/documentation/" + tail[..<end]
                if let hash = link.firstIndex(of: "#") { link = String(link[..<hash]) }
                while link.hasSuffix("/") { link.removeLast() }
                links.insert(link.replacingOccurrences(of: "&amp;", with: "&"))
                rest = tail[end...]
            }
            return links
        }
    }

    let folder: URL
    let server: LoopbackServer
    /// Every path served: each file, and each page's folder with and without its slash.
    private(set) var served: Set<String> = []
    private let profile: URL

    /// The module's landing page, e.g. `/documentation/backgroundtransfer`.
    let root: String

    init(_ folder: URL, root: String) throws {
        self.folder = folder
        self.root = root
        profile = folder.deletingLastPathComponent().appendingPathComponent("browser-profile")
        server = try LoopbackServer()
        let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
        while let file = files?.nextObject() as? URL {
            guard (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true else { continue }
            let path = String(file.standardizedFileURL.path.dropFirst(folder.standardizedFileURL.path.count))
            serve(path, file: file)
            if file.lastPathComponent == "index.html" {
                let page = String(path.dropLast("index.html".count))
                serve(page, file: file)
                if page.count > 1 { serve(String(page.dropLast()), file: file) }
            }
        }
    }

    private func serve(_ path: String, file: URL) {
        let types = ["html": "text/html; charset=utf-8", "js": "text/javascript", "css": "text/css", "json": "application/json", "svg": "image/svg+xml", "ico": "image/x-icon", "png": "image/png", "jpg": "image/jpeg"]
        server.serve(path, file: file, options: RouteOptions(contentType: types[file.pathExtension] ?? "application/octet-stream"))
        served.insert(path)
    }

    func stop() { server.stop() }

    /// Loads `path` in chromium-headless-shell and returns the DOM once the scripts have run.
    func render(_ path: String) throws -> Page {
        let url = "http://127.0.0.1:\(server.port)\(path)"
        let arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
                         "--virtual-time-budget=10000", "--dump-dom", url]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TimelineTests.browser)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Read to the end on this thread; the browser's deadline is kept by a timer that kills it by pid.
        let pid = process.processIdentifier
        let deadline = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: deadline)
        // `readToEnd()`, not `readDataToEndOfFile()`: corelibs' `readDataToEndOfFile` traps
        // (`try!`) on a read error, and one (ENOTCONN on the pipe) took the whole test process
        // down in a loaded run. The error fails this page instead, with its status beside it.
        let read = Result { try output.fileHandleForReading.readToEnd() ?? Data() }
        process.waitUntilExit()
        deadline.cancel()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw TestFailure("chromium-headless-shell did not render \(path) (status \(process.terminationStatus))")
        }
        let data: Data
        do { data = try read.get() } catch {
            throw TestFailure("cannot read what chromium-headless-shell rendered of \(path): \(error)")
        }
        return Page(dom: String(decoding: data, as: UTF8.self))
    }

    /// Renders the landing page, then every page it and the articles link to, one level
    /// down; checks each rendered, and that every link on it, at any depth, leads to a page
    /// that was built. Returns how many pages were rendered.
    func crawl() throws -> Int {
        let landing = try render(root)
        try #require(!landing.isNotFound && landing.hasTitle, "\(root) did not render: \(landing.dom.prefix(800))")
        var rendered: [String: Page] = [root: landing]
        var queue = landing.documentationLinks.filter(isTopLevel).sorted()
        while let path = queue.popLast() {
            guard rendered[path] == nil else { continue }
            let page = try render(path)
            rendered[path] = page
            if isArticle(path) { queue += page.documentationLinks.filter(isTopLevel).sorted() }
        }
        for (path, page) in rendered.sorted(by: { $0.key < $1.key }) {
            #expect(!page.isNotFound && page.hasTitle, "\(path) did not render")
            for link in page.documentationLinks where !wasBuilt(link) {
                Issue.record("\(path) links to \(link), which was not built")
            }
        }
        return rendered.count
    }

    /// A page directly under the module (a type, a global, an article), not a member.
    func isTopLevel(_ path: String) -> Bool {
        path.hasPrefix(root + "/") && !path.dropFirst(root.count + 1).contains("/")
    }

    /// An article, whose links the test follows one level further.
    func isArticle(_ path: String) -> Bool {
        let name = path.split(separator: "/").last.map(String.init) ?? ""
        let data = folder.appendingPathComponent("data\(path).json")
        guard let json = try? Data(contentsOf: data), let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
              let metadata = object["metadata"] as? [String: Any] else { return false }
        return metadata["role"] as? String == "article" || name == "behaviourreference" || path == root
    }

    /// Whether docc built the page `path` names: its HTML and the data its script loads.
    func wasBuilt(_ path: String) -> Bool {
        served.contains(path) && served.contains("/data\(path).json")
    }

    /// Paths the browser asked for that are not files of the site (answered 404), except the
    /// page that is missing on purpose and DocC's optional theme (`theme-settings.json`, which
    /// a site without a custom theme does not have).
    func requestsForMissingFiles() -> [String] {
        let expected: Set<String> = ["\(root)/no-such-page", "/theme-settings.json"]
        return Array(Set(server.requests.map(\.path)).subtracting(served).subtracting(expected)).sorted()
    }
}
