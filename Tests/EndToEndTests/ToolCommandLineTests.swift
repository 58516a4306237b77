import Foundation
import Testing
import TransferContainer

/// `bgtransfer` as a well-made Unix tool (issue "command lines a developer trusts"): a
/// container that is not there, an app nobody knows and arguments nobody asked for are
/// errors with a status and a line naming them, never an empty success.
@Suite(.timeLimit(.minutes(2)))
struct ToolCommandLineTests {
    @Test("inspect, log, watch --once, conditions and force-quit on a missing container, or on a file, exit 66 naming the path")
    func missingContainer() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let missing = container.parent.appendingPathComponent("no-such-container").path
        let file = container.parent.appendingPathComponent("a-file").path
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        for path in [missing, file] {
            for command in [["inspect"], ["inspect", "--json"], ["log"], ["watch", "--once"], ["conditions"], ["force-quit", "com.example.host"]] {
                let outcome = try Executable.bgtransfer.start(["--container", path] + command, in: container, passContainer: false).wait(timeout: 30)
                #expect(outcome.status == 66, "\(command) on \(path): status \(outcome.status ?? -1), \(outcome.stderr)")
                #expect(outcome.stderr.contains(path), "\(command): the error names the path: \(outcome.stderr)")
                #expect(outcome.stdout.isEmpty, "\(command): nothing printed as if it worked: \(outcome.stdout)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: missing), "no command made the missing container")
    }

    @Test("force-quit of an app that never used the container fails naming it; demo refuses arguments it does not take")
    func unknownAppAndExtraArguments() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/x"], in: container)
        try #require(created.status == 0, "\(created.stderr)")

        let nope = try Executable.bgtransfer.run(["force-quit", "com.example.nope"], in: container)
        #expect(nope.status == 1 && nope.stderr.contains("com.example.nope"), "status \(nope.status ?? -1): \(nope.stderr)")
        #expect(ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks).count == 1, "nothing was cancelled")

        let demo = try Executable.bgtransfer.run(["demo", "extra"], in: container)
        #expect(demo.status == 64 && demo.stderr.contains("extra"), "status \(demo.status ?? -1): \(demo.stderr)")
    }
}
