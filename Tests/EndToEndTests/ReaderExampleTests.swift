import Foundation
import TestPeers
import Testing
import LoopbackServer
import TransferContainer
import Digests
import TransferLogging

/// `Examples/Reader`, a package of its own that uses the library as an adopter would: built
/// with `swift build --package-path Examples/Reader`, then run end to end (issue 18).
/// A clean build of the example takes about 45 s on 2 cores; later runs rebuild nothing. Its
/// own tests (`swift test --package-path Examples/Reader`) build a test bundle more and run
/// six devices: hence the longer limit.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct ReaderExampleTests {
    /// The repository's root, from this file's path.
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// Inside this package's own `.build/` (ignored by git), kept between runs so that only
    /// the first run builds the library a second time.
    static let scratch = repository.appendingPathComponent(".build/examples-reader")

    /// Builds the example package once per test process; returns its products' folder.
    static let built: Result<URL, TestFailure> = {
        let container: TestContainer
        do { container = try TestContainer() } catch { return .failure(TestFailure("\(error)")) }
        defer { container.tearDown() }
        let build: RunningProcess
        do {
            build = try Executable(name: "swift", path: "/usr/bin/env").start(
                ["swift", "build", "--package-path", repository.appendingPathComponent("Examples/Reader").path, "--scratch-path", scratch.path],
                in: container, passContainer: false)
        } catch { return .failure(TestFailure("cannot run swift build: \(error)")) }
        let outcome = build.wait(timeout: 480)
        guard outcome.status == 0 else {
            return .failure(TestFailure("swift build --package-path Examples/Reader failed (\(String(describing: outcome.status))): \(outcome.stdout.suffix(2000)) \(outcome.stderr.suffix(2000))"))
        }
        return .success(scratch.appendingPathComponent("debug"))
    }()

    static func executable(_ name: String) throws -> Executable {
        Executable(name: name, path: try built.get().appendingPathComponent(name).path)
    }

    @Test("The documentation's Reader example (the ReaderExample article) is Examples/Reader's code, file for file")
    func documentationIsTheExample() throws {
        let article = Self.repository.appendingPathComponent("Sources/BackgroundTransfer/BackgroundTransfer.docc/ReaderExample.md")
        let text = try String(contentsOf: article, encoding: .utf8)
        var shown: [String: String] = [:]
        var rest = text[...]
        while let marker = rest.range(of: "<!-- Examples/Reader/") {
            let pathEnd = try #require(rest[marker.upperBound...].range(of: " -->"))
            let path = "Examples/Reader/" + rest[marker.upperBound..<pathEnd.lowerBound]
            let open = try #require(rest[pathEnd.upperBound...].range(of: "```swift\n"))
            let close = try #require(rest[open.upperBound...].range(of: "```\n"))
            shown[path] = String(rest[open.upperBound..<close.lowerBound])
            rest = rest[close.upperBound...]
        }
        #expect(Set(shown.keys) == ["Examples/Reader/Package.swift", "Examples/Reader/Sources/reader-widget/main.swift", "Examples/Reader/Sources/reader-app/main.swift", "Examples/Reader/Sources/reader-app/AppDelegate.swift", "Examples/Reader/Sources/fetch-later/main.swift"])
        for (path, code) in shown {
            let file = try String(contentsOf: Self.repository.appendingPathComponent(path), encoding: .utf8)
            #expect(code == file, "ReaderExample.md's \(path) differs from the file")
        }
    }

    @Test("Examples/Reader's own tests, written with the BackgroundTransferTesting product alone, pass under `swift test --package-path Examples/Reader`")
    func readerTestsPass() async throws {
        // Minutes of blocking waits: on a thread of its own, not one of the test runner's few.
        try await onOwnThread { try self.runReaderTests() }
    }

    func runReaderTests() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let report = container.parent.appendingPathComponent("reader-tests.xml")
        let run = try Executable(name: "swift", path: "/usr/bin/env").start(
            ["swift", "test", "--package-path", Self.repository.appendingPathComponent("Examples/Reader").path, "--scratch-path", Self.scratch.path,
             "--xunit-output", report.path],
            in: container, passContainer: false)
        let outcome = run.wait(timeout: 540)
        #expect(outcome.status == 0, "swift test --package-path Examples/Reader: \(String(describing: outcome.status)) \(outcome.stdout.suffix(3000)) \(outcome.stderr.suffix(2000))")
        // Swift Testing's report, beside XCTest's: every test of the example ran, none failed.
        let xml = (try? String(contentsOf: container.parent.appendingPathComponent("reader-tests-swift-testing.xml"), encoding: .utf8)) ?? ""
        #expect(xml.contains("tests=\"6\"") && xml.contains("failures=\"0\""), "\(xml)")
    }

    @Test("reader-widget starts a download and exits; transferd (found beside it) relaunches reader-app, which files it in the app group's Downloads/")
    func widgetDownloadRelaunchesTheApp() async throws {
        // Minutes of blocking waits: on a thread of its own, not one of the test runner's few.
        try await onOwnThread { try self.runWidgetDownload() }
    }

    func runWidgetDownload() throws {
        let widget = try Self.executable("reader-widget")
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 1 << 20, seed: 18)
        server.serve("/articles/issue-18.pdf", data: payload)

        let started = Date()
        let outcome = try widget.run(["download", server.url(for: "/articles/issue-18.pdf").absoluteString], in: container, timeout: 60)
        #expect(outcome.status == 0, "stdout \(outcome.stdout) stderr \(outcome.stderr)")
        #expect(outcome.stdout.contains("started task 1"), "\(outcome.stdout)")
        #expect(Date().timeIntervalSince(started) < 20, "the widget exits at once")

        let delivered = container.layout.root.appendingPathComponent("AppGroups/group.com.example.reader/Downloads/issue-18.pdf")
        #expect(waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: delivered.path) }, "not delivered: \(TransferLog.entries(layout: container.layout).map(\.message).suffix(20))")
        #expect(try SHA256.hexDigest(ofFile: delivered.path) == SHA256.hexDigest(of: payload))
        // On a loaded machine the download may finish while the widget still holds its session:
        // then the widget takes the event and files the file itself, as an extension does on iOS.
        let widgetTookIt = outcome.stdout.contains("saved issue-18.pdf")
        if !widgetTookIt {
            let acknowledged = container.waitForCompletionHandler(of: "reader-app")
            #expect(acknowledged?.session == "com.example.reader.widget.background", "reader-app was relaunched for the widget's session")
        }
        let widgetSession = container.layout.sessionsDirectory.appendingPathComponent("com.example.reader/com.example.reader.widget.background")
        #expect(waitUntil { (try? JournalContents.read(session: widgetSession))?.events.isEmpty == true }, "the event was acknowledged")
        let daemon = container.logEntries(process: "reader-widget").first { $0.message.contains("started") && $0.message.contains("transferd") }
        #expect(daemon?.message.contains(Self.scratch.path) == true, "the widget started the transferd built beside it: \(String(describing: daemon?.message))")

        // A user launch of the app lists what arrived.
        let listing = try Self.executable("reader-app").run([], in: container, timeout: 30)
        #expect(listing.status == 0)
        #expect(listing.stdout.contains("issue-18.pdf"), "\(listing.stdout)")
    }

    @Test("Just a program: fetch-later, with no entitlements, starts a download and exits; it is relaunched as itself and files it in its own Documents/")
    func plainProgramIsRelaunched() async throws {
        // Minutes of blocking waits: on a thread of its own, not one of the test runner's few.
        try await onOwnThread { try self.runPlainProgram() }
    }

    func runPlainProgram() throws {
        let program = try Self.executable("fetch-later")
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let payload = testPayload(size: 512 << 10, seed: 81)
        // Four seconds a download: the program has exited by then and is relaunched for it.
        // Served at once, it finished in a CI run while the program still held its session,
        // which then took the event itself (as an app that is still running does).
        server.serve("/weights/model.bin", data: payload, options: RouteOptions(bytesPerSecond: 128 << 10))

        let outcome = try program.run([server.url(for: "/weights/model.bin").absoluteString], in: container, timeout: 60)
        #expect(outcome.status == 0, "stdout \(outcome.stdout) stderr \(outcome.stderr)")
        let delivered = container.layout.root.appendingPathComponent("Apps/program.fetch-later/Documents/model.bin")
        #expect(waitUntil(timeout: 60) { FileManager.default.fileExists(atPath: delivered.path) }, "not delivered: \(TransferLog.entries(layout: container.layout).map(\.message).suffix(20))")
        #expect(try SHA256.hexDigest(ofFile: delivered.path) == SHA256.hexDigest(of: payload))
        let relaunched = container.waitForCompletionHandler(of: "fetch-later")
        #expect(relaunched?.session == "downloads", "not relaunched: \(TransferLog.entries(layout: container.layout).map(\.message).suffix(20))")
        let listing = try program.run([], in: container, timeout: 30)
        #expect(listing.stdout.contains("model.bin"), "\(listing.stdout)")

        // Known to the daemon as the program it is.
        let registry = try String(contentsOf: container.layout.appRegistry, encoding: .utf8)
        #expect(registry.contains("program.fetch-later"))
    }
}
