import Foundation
import Testing
import TransferContainer
import TransferPOSIX
import TransferLogging
@testable import TransferEngine

/// A finished download takes its final name (`CFNetworkDownload_N.tmp`) only once its
/// completion event is on disk, so that a file under that name is always described by its
/// event, never by an older record of the task. A daemon that died between the commit and
/// the rename finishes the rename when it loads the session.
@Suite struct FinishedFileNamingTests {
    /// A session with download task 1 whose answer had `status`, its body written under its
    /// working name, and the task ended with its completion event (not yet committed).
    private func finishedDownload(status: Int) throws -> (SessionFixture, body: String, finished: String, event: EventRecord) {
        let fixture = try SessionFixture("finished-naming")
        let session = fixture.session
        var task = try session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/file")), inBackground: false, pendingFailure: nil, at: Date())
        task.response = ResponseRecord(url: "http://127.0.0.1:9/file", statusCode: status, headers: ["Content-Length": "4"])
        try FileManager.default.createDirectory(atPath: session.downloadsDirectory, withIntermediateDirectories: true)
        let body = session.bodyPath(ofFinished: task)
        try Data("body".utf8).write(to: URL(fileURLWithPath: body))
        let finished = session.finishedPath(for: task)
        let event = try session.complete(task, downloadedFile: finished, error: nil, at: Date())
        return (fixture, body, finished, event)
    }

    @Test("A 2xx body lies in the partial file and an error page in its own until the event is on disk; then it takes the event's name", arguments: [200, 206, 404, 503])
    func namedOnceTheEventIsDurable(status: Int) throws {
        let (fixture, body, finished, _) = try finishedDownload(status: status)
        #expect(body.hasSuffix((200..<300).contains(status) ? "task-1.partial" : "task-1.partial.response"))
        #expect(!FileManager.default.fileExists(atPath: finished), "named before its event is on disk")
        let commit = try #require(try fixture.session.takeCommit())
        #expect(commit.filesToRename == [FileRename(from: body, to: finished)])
        let root = try RootDirectory.open(fixture.root.path)
        defer { root.descriptor.close() }
        try commit.perform(log: fixture.log, root: root)
        fixture.session.committed(commit)
        #expect(FileManager.default.contents(atPath: finished) == Data("body".utf8))
        #expect(!FileManager.default.fileExists(atPath: body))
    }

    @Test("A commit that failed keeps its rename for the next one: the file is never named before its event is on disk")
    func failedCommitKeepsTheRename() throws {
        let (fixture, body, finished, _) = try finishedDownload(status: 200)
        let failed = try #require(try fixture.session.takeCommit())
        failed.files.forEach { $0.0.close() }
        fixture.session.commitFailed(failed)
        let again = try #require(try fixture.session.takeCommit(), "nothing left to commit after a failure")
        #expect(again.filesToRename == [FileRename(from: body, to: finished)])
        #expect(again.journal != nil, "the event's line is written again")
    }

    @Test("A rename refused once the lines are on disk is returned, not dropped: the next commit makes it, with no line written again; a body already gone is not waited for")
    func refusedRenameIsTriedAgain() throws {
        let (fixture, body, finished, _) = try finishedDownload(status: 200)
        // A folder where the name goes refuses the rename (EISDIR), as a full disk can (ENOSPC).
        try FileManager.default.createDirectory(atPath: finished + "/in-the-way", withIntermediateDirectories: true)
        let root = try RootDirectory.open(fixture.root.path)
        defer { root.descriptor.close() }
        let commit = try #require(try fixture.session.takeCommit())
        let left = try #require(try commit.perform(log: fixture.log, root: root), "the refused rename was dropped")
        #expect(left.renames == [FileRename(from: body, to: finished)] && left.error.code == EISDIR)
        fixture.session.committed(commit)
        fixture.session.renameAgain(left.renames)

        try FileManager.default.removeItem(atPath: finished)
        let again = try #require(try fixture.session.takeCommit(), "nothing left to commit")
        #expect(again.journal == nil, "the event's line written twice")
        #expect(try again.perform(log: fixture.log, root: root) == nil)
        #expect(FileManager.default.contents(atPath: finished) == Data("body".utf8))

        // Both names gone (a body removed by hand): logged, not tried forever.
        let (gone, goneBody, goneFinished, _) = try finishedDownload(status: 200)
        try FileManager.default.removeItem(atPath: goneBody)
        let goneRoot = try RootDirectory.open(gone.root.path)
        defer { goneRoot.descriptor.close() }
        #expect(try #require(try gone.session.takeCommit()).perform(log: gone.log, root: goneRoot) == nil)
        #expect(!FileManager.default.fileExists(atPath: goneFinished))
        #expect(TransferLog.entries(layout: gone.layout).contains { $0.event?.kind == .finishedFileGone })
    }

    @Test("The daemon died after the commit, before the rename: loading the session gives the body its name; the event and its file agree", arguments: [200, 404])
    func loadingFinishesTheRename(status: Int) throws {
        let (fixture, body, finished, event) = try finishedDownload(status: status)
        let commit = try #require(try fixture.session.takeCommit())
        try commit.journal?.perform() // the lines are on disk; the rename never ran
        let root = try RootDirectory.open(fixture.root.path)
        defer { root.descriptor.close() }
        let loaded = try DaemonSession(layout: fixture.layout, log: fixture.log, loadingFrom: fixture.session.directory, root: root)
        #expect(loaded.events[event.number]?.downloadedFile.flatMap(loaded.resolvedPath) == finished)
        #expect(FileManager.default.contents(atPath: finished) == Data("body".utf8))
        #expect(!FileManager.default.fileExists(atPath: body))
        #expect(TransferLog.entries(layout: fixture.layout).contains { $0.event?.kind == .finishedFileNamedAtLoad && $0.task == 1 })
    }

    @Test("An event whose file the holder already took, and whose body is gone too, loads as it is: nothing renamed, nothing made up")
    func takenFileIsLeftAlone() throws {
        let (fixture, body, finished, event) = try finishedDownload(status: 200)
        let commit = try #require(try fixture.session.takeCommit())
        try commit.journal?.perform()
        try FileManager.default.removeItem(atPath: body)
        let root = try RootDirectory.open(fixture.root.path)
        defer { root.descriptor.close() }
        let loaded = try DaemonSession(layout: fixture.layout, log: fixture.log, loadingFrom: fixture.session.directory, root: root)
        #expect(loaded.events[event.number] != nil)
        #expect(!FileManager.default.fileExists(atPath: finished) && !FileManager.default.fileExists(atPath: body))
    }
}
