import Foundation
import Testing
import LoopbackServer

/// Every command line the documentation lists (the CommandLines article's block) is run here
/// with its exit code, or names the test that runs it (issue "command lines a developer
/// trusts"); each program's `--help`, which the article names as the reference, lists its
/// subcommands; and the README's two commands are the ones it promises. A line added to the
/// article without an entry here fails the test.
@Suite(.timeLimit(.minutes(20)))
struct ReadmeCommandLinesTests {
    static let article = "Sources/BackgroundTransfer/BackgroundTransfer.docc/CommandLines.md"

    /// The article's command lines, each as its program and its subcommand (the first word
    /// after the program), e.g. "host-app download"; "host-app" for a user launch.
    static func documentedCommands() throws -> Set<String> {
        let text = try String(contentsOf: ReaderExampleTests.repository.appendingPathComponent(article), encoding: .utf8)
        guard let open = text.range(of: "```\n"), let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex) else {
            throw TestFailure("no command-line block in \(article)")
        }
        return Set(text[open.upperBound..<close.lowerBound].split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: "#").first?.split(separator: " ").map(String.init) ?? []
            guard let program = words.first else { return nil }
            var rest = words.dropFirst()
            if rest.first == "[--container" { rest = rest.dropFirst(2) }
            guard let word = rest.first, !word.hasPrefix("["), word.uppercased() != word else { return program }
            return "\(program) \(word)"
        })
    }

    /// The README's commands: what a newcomer types first.
    static func readmeCommands() throws -> [String] {
        let readme = try String(contentsOf: ReaderExampleTests.repository.appendingPathComponent("README.md"), encoding: .utf8)
        guard let open = readme.range(of: "```sh\n"), let close = readme.range(of: "\n```", range: open.upperBound..<readme.endIndex) else {
            throw TestFailure("no sh block in README.md")
        }
        return readme[open.upperBound..<close.lowerBound].split(separator: "\n").map {
            String($0.split(separator: "#").first ?? "").trimmingCharacters(in: .whitespaces)
        }
    }

    /// Commands another test runs end to end, with its name.
    static let coveredElsewhere: [String: String] = [
        "host-app --handle-events-for-background-session": "ExtensionDownloadTests (transferd relaunches the host so)",
        "host-app trust-certificate": "HTTPSProcessTests, ServerTrustRestartTests",
        "transferd": "DaemonUnderTest, in every end-to-end test (with each option: SchedulingProcessTests, TerminationTests, CrashLoopTests)",
        "bgtransfer demo": "ToolCommandLineTests.demoSaysWhyItWaits",
        "reader-widget download": "ReaderExampleTests", "reader-app": "ReaderExampleTests", "fetch-later": "ReaderExampleTests",
        "transfer-bench": "run by hand (swift run -c release transfer-bench); --help here",
    ]

    @Test("The README's two commands are the demo and CI's script, and both exist")
    func readmeCommandsExist() throws {
        #expect(try Self.readmeCommands() == ["swift run bgtransfer demo", "bash .ci/run"])
        #expect(FileManager.default.isReadableFile(atPath: ReaderExampleTests.repository.appendingPathComponent(".ci/run").path))
        #expect(try Self.documentedCommands().contains("bgtransfer demo"))
    }

    @Test("Each program's --help, which the documentation names as the reference, lists the subcommands it documents")
    func helpListsTheDocumentedCommands() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let programs: [String: Executable] = ["fetch-extension": .fetchExtension, "share-extension": .shareExtension,
                                              "host-app": .hostApp, "bgtransfer": .bgtransfer]
        for command in try Self.documentedCommands() {
            let words = command.split(separator: " ").map(String.init)
            guard words.count == 2, let executable = programs[words[0]] else { continue }
            let help = try executable.run(["--help"], in: container, timeout: 30)
            #expect(help.status == 0 && help.stdout.contains(words[1]), "\(words[0]) --help does not list \(words[1]): \(help.stdout.prefix(600))")
        }
    }

    @Test("Every command line in the documentation runs with the exit code it should, in order, on one container")
    func everyCommandLine() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/file.bin", data: testPayload(size: 64 << 10, seed: 11))
        server.acceptUploads(at: "/upload", options: UploadOptions(resumable: [6]))
        let upload = container.appGroup.appendingPathComponent("Outbox/picked.bin")
        try FileManager.default.createDirectory(at: upload.deletingLastPathComponent(), withIntermediateDirectories: true)
        try testPayload(size: 32 << 10, seed: 12).write(to: upload)
        _ = try DaemonUnderTest.start(container)
        let file = server.url(for: "/file.bin").absoluteString
        let put = server.url(for: "/upload").absoluteString
        let page = container.parent.appendingPathComponent("timeline.html").path

        let runs: [(command: String, executable: Executable, arguments: [String], status: Int32)] = [
            ("fetch-extension download", .fetchExtension, ["download", file, "--description", "readme", "--wait"], 0),
            ("fetch-extension upload", .fetchExtension, ["upload", upload.path, put, "--method", "PUT", "--wait"], 0),
            ("share-extension download", .shareExtension, ["download", file, "--wait"], 0),
            ("share-extension upload", .shareExtension, ["upload", upload.path, put, "--method", "POST", "--wait"], 0),
            ("host-app", .hostApp, [], 0),
            ("host-app download", .hostApp, ["download", file, "--wait"], 0),
            ("host-app download", .hostApp, ["download", file, "--foreground", "--time-limit", "30"], 0),
            ("host-app download", .hostApp, ["download", file, "--invalidate", "finish"], 0),
            ("host-app enqueue", .hostApp, ["enqueue", file], 0),
            ("host-app fetch", .hostApp, ["fetch", file], 0),
            ("host-app remember-password", .hostApp, ["remember-password", "realm", "user", "password"], 0),
            ("bgtransfer conditions", .bgtransfer, ["conditions", "--network", "wifi", "--power", "charging"], 0),
            ("bgtransfer inspect", .bgtransfer, ["inspect", "--json"], 0),
            ("bgtransfer log", .bgtransfer, ["log", "--level", "info"], 0),
            ("bgtransfer watch", .bgtransfer, ["watch", "--once"], 0),
            ("bgtransfer timeline", .bgtransfer, ["timeline", "--output", page], 0),
            ("bgtransfer force-quit", .bgtransfer, ["force-quit", "com.example.host"], 0),
        ]
        let documented = try Self.documentedCommands()
        let known = Set(runs.map(\.command)).union(Self.coveredElsewhere.keys)
        #expect(documented.subtracting(known).isEmpty, "documented command lines with no test: \(documented.subtracting(known).sorted())")
        #expect(known.subtracting(documented).isEmpty, "tested command lines the documentation no longer lists: \(known.subtracting(documented).sorted())")

        for run in runs {
            let outcome = try run.executable.run(run.arguments, in: container, timeout: 60)
            #expect(outcome.status == run.status, "\(run.executable.name) \(run.arguments.joined(separator: " ")): status \(outcome.status ?? -1), \(outcome.stderr.suffix(400))")
        }
        let bench = try Executable(name: "transfer-bench").start(["--help"], in: container, passContainer: false).wait(timeout: 30)
        #expect(bench.status == 0 && bench.stdout.contains("transfer-bench"), "\(bench.stderr)")
    }
}
