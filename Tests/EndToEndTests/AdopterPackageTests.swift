import Digests
import Foundation
import LoopbackServer
import TestPeers
import TransferContainer
import Testing
import TransferLogging

/// A package that depends on this one as adopters do: by URL and version, with the README's
/// install line, against a `file://` repository holding this working tree tagged with that
/// version. Its executable is the README's example, built in release and run for a real download,
/// relaunched by the `transferd` built beside it. SwiftPM refuses unsafe build flags in a
/// dependency named by version whatever the configuration, and a release build links
/// differently from a debug one. A debug build of a package that uses the library is
/// `ReaderExampleTests`' (`Examples/Reader`, by path): the same dependency resolved the same way
/// and linked as debug builds link. Building the library a third time, here in debug, would
/// only repeat those two, at about 2 minutes of CI's 2 cores.
@Suite(.serialized, .timeLimit(.minutes(25)))
struct AdopterPackageTests {
    static let repository = ReaderExampleTests.repository

    @Test("A package naming a tagged version by URL builds in release and runs the README's example")
    func taggedVersionBuildsAndRuns() async throws {
        // Minutes of blocking waits: on a thread of its own, not one of the test runner's few.
        try await onOwnThread { try Self.buildAndRun() }
    }

    static func buildAndRun() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let readme = try String(contentsOf: repository.appendingPathComponent("README.md"), encoding: .utf8)
        let install = try #require(AdopterManifest.installLine(in: readme), "the README names no `.package(url:from:)`")
        let example = try #require(AdopterManifest.onlySwiftBlock(in: readme),
                                   "the README has not exactly one swift block")

        let work = container.parent.appendingPathComponent("adopter")
        let library = work.appendingPathComponent("BackgroundTransfer")
        try tagWorkingTree(into: library, version: install.version)
        let consumer = work.appendingPathComponent("consumer")
        let sources = consumer.appendingPathComponent("Sources/consumer")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        let manifest = AdopterManifest.manifest(installLine: install.line.replacingOccurrences(
            of: install.url, with: library.absoluteString))
        try Data(manifest.utf8).write(to: consumer.appendingPathComponent("Package.swift"))
        try Data(example.utf8).write(to: sources.appendingPathComponent("main.swift"))

        try shell("swift build -c release --package-path '\(consumer.path)'", in: container, timeout: 1200)
        let binaries = consumer.appendingPathComponent(".build/release")
        #expect(FileManager.default.isExecutableFile(atPath: binaries.appendingPathComponent("transferd").path),
                "transferd is built beside the adopter's executable")
        try runExample(binaries.appendingPathComponent("consumer"), configuration: "release")
    }

    /// The README's example is a program: given a URL it hands a background download to the
    /// daemon and exits; `transferd`, found beside it, relaunches it to file the download in its
    /// Documents folder. Run for real, with its own container and server.
    static func runExample(_ binary: URL, configuration: String) throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 300 << 10, seed: 44)
        server.serve("/files/report.pdf", data: payload)
        let outcome = try Executable(name: "consumer", path: binary.path)
            .run([server.url(for: "/files/report.pdf").absoluteString], in: container, timeout: 60)
        #expect(outcome.status == 0, "\(configuration): \(outcome.stdout) \(outcome.stderr)")
        let saved = container.layout.root.appendingPathComponent("Apps/program.consumer/Documents/report.pdf")
        let log = { TransferLog.entries(layout: container.layout).map(\.message).suffix(20) }
        #expect(waitUntil(timeout: 60) { (try? SHA256.hexDigest(ofFile: saved.path)) == SHA256.hexDigest(of: payload) },
                "\(configuration): the relaunched example did not file the served bytes: \(log())")
        // It calls its completion handler inside urlSessionDidFinishEvents, on the main queue:
        // the relaunch acknowledges its event, not stuck until its background time runs out.
        let session = container.sessionDirectory("downloads", family: "program.consumer")
        let acknowledged = waitUntil(timeout: 60) {
            (try? JournalContents.read(session: session))?.events.isEmpty == true
        }
        #expect(acknowledged,
                "\(configuration): the relaunched example never exited with its event acknowledged: \(log())")
    }

    /// This working tree as it is (tracked and new files, not ignored ones), committed in a
    /// repository of its own and tagged `version`: what a release looks like to SwiftPM.
    static func tagWorkingTree(into library: URL, version: String) throws {
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        let container = try TestContainer()
        defer { container.tearDown() }
        try shell("""
            git -C '\(repository.path)' ls-files -z --cached --others --exclude-standard \
              | tar --null --ignore-failed-read -T - -C '\(repository.path)' -cf - | tar -xf - -C '\(library.path)' \
            && cd '\(library.path)' && git init -q && git add -A \
            && git -c user.name=test -c user.email=test@127.0.0.1 commit -q -m release && git tag '\(version)'
            """, in: container, timeout: 120)
    }

    @discardableResult
    static func shell(_ command: String, in container: TestContainer, timeout: TimeInterval) throws -> String {
        let process = try Executable(name: "sh", path: "/bin/sh").start(["-c", command + " 2>&1"], in: container,
                                                                          passContainer: false)
        let outcome = process.wait(timeout: timeout)
        guard outcome.status == 0 else {
            let status = String(describing: outcome.status)
            throw TestFailure("`\(command)` ended \(status): \(outcome.stdout.suffix(3000))")
        }
        return outcome.stdout
    }
}

/// What the test reads from the README and writes for the adopter's package.
enum AdopterManifest {
    struct InstallLine: Equatable {
        var line: String
        var url: String
        var version: String
    }

    /// The README's `.package(url: "…", from: "…")`.
    static func installLine(in readme: String) -> InstallLine? {
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingCharacters(in: .whitespaces)
            let opening = ".package(url: \""
            guard text.hasPrefix(opening), let urlEnd = text.dropFirst(opening.count).firstIndex(of: "\""),
                  let from = text.range(of: "from: \"") else { continue }
            let url = String(text[text.index(text.startIndex, offsetBy: opening.count)..<urlEnd])
            guard let versionEnd = text[from.upperBound...].firstIndex(of: "\"") else { continue }
            let line = text.hasSuffix(",") ? String(text.dropLast()) : text
            return InstallLine(line: line, url: url, version: String(text[from.upperBound..<versionEnd]))
        }
        return nil
    }

    /// The body of the README's one ```swift block; nil when there are none or several.
    static func onlySwiftBlock(in readme: String) -> String? {
        let blocks = readme.components(separatedBy: "```swift\n").dropFirst()
        guard blocks.count == 1, let body = blocks.first?.components(separatedBy: "```").first else { return nil }
        return body
    }

    static func manifest(installLine: String) -> String {
        """
        // swift-tools-version:6.0
        import PackageDescription

        let package = Package(
            name: "consumer",
            dependencies: [
                \(installLine),
            ],
            targets: [
                .executableTarget(name: "consumer", dependencies: [
                    .product(name: "BackgroundTransfer", package: "BackgroundTransfer"),
                    .product(name: "transferd", package: "BackgroundTransfer"),
                ]),
            ]
        )

        """
    }
}
