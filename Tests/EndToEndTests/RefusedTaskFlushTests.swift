import Foundation
import Testing
import LoopbackServer
import TransferContainer

/// `flush` never shows a task as accepted that the daemon has ended, nor as completed without
/// its error (issue 44).
@Suite(.timeLimit(.minutes(3)))
struct RefusedTaskFlushTests {
    @Test("An upload of a file outside the app's containers is completed with -1102 after flush, never accepted")
    func refusedUploadShowsItsError() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.acceptUploads(at: "/up")

        // In the app group by its name, outside every container by what it leads to.
        let outside = container.parent.appendingPathComponent("outside.txt")
        try Data("not the app's to send".utf8).write(to: outside)
        try FileManager.default.createDirectory(at: container.appGroup, withIntermediateDirectories: true)
        let link = container.appGroup.appendingPathComponent("outside-link.txt")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)

        let url = server.url(for: "/up").absoluteString
        let outcome = try Executable.shareExtension.run(["upload", link.path, url], in: container)
        #expect(outcome.status == 2, "refused: \(outcome.stdout) \(outcome.stderr)")
        let said = outcome.stderr
        #expect(said.contains("(-1102)") && said.contains(link.path), "the error, with the path: \(said)")
        // The identifier alone on a line is what the stand-in prints for a task the daemon has.
        let lines = outcome.stdout.split(separator: "\n")
        #expect(!lines.contains("1"), "no task identifier: the task never looked accepted: \(outcome.stdout)")
        #expect(server.receivedUploads(at: "/up").isEmpty)
    }
}
