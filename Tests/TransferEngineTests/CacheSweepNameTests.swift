import Foundation
import Testing
@testable import TransferEngine
import TransferContainer

/// Which names in a session's cache the start-up sweep may judge: only the files the daemon
/// makes for a task, never resume data's files or anyone else's.
@Suite struct CacheSweepNameTests {
    @Test("the daemon's own task files name their task; resume data's files and other names name none")
    func names() {
        let ours = ["task-7.partial": 7, "task-7.partial.response": 7, "task-12.upload": 12, "task-12.upload-response": 12, "CFNetworkDownload_3.tmp": 3]
        for (name, task) in ours { #expect(CacheSweep.taskIdentifier(inDaemonFile: name) == task, "\(name)") }
        let others = ["resume-0B1C2D3E-AAAA-BBBB-CCCC-DDDDEEEEFFFF.partial", "resume-1.upload", "task-.partial", "task-x7.partial", "task-7.partial.tmp",
                      "task-99999999999.partial", "task-0.partial", "task-+7.partial", "task-٣.partial", "notes.txt", ".journal.jsonl.tmp", "CFNetworkDownload_3.partial"]
        for name in others { #expect(CacheSweep.taskIdentifier(inDaemonFile: name) == nil, "\(name)") }
    }
}

/// The sweep over a container: a cache folder whose name is also a session of another app
/// family that was skipped at load (its record unusable) is left alone, though a loaded
/// session uses that folder too, since the skipped session's journal may name its files.
@Suite struct CacheSweepSkippedSessionTests {
    @Test("""
        a folder a loaded session shares with a session skipped at load keeps its files; \
        without the skipped one it is swept
        """)
    func skippedSessionsFolderIsLeftAlone() throws {
        let fixture = try DaemonFixture()
        let layout = fixture.daemon.layout
        let folder = fixture.session.downloadsDirectory
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let orphan = folder + "/task-77.partial"
        try Data("the skipped session's partial data".utf8).write(to: URL(fileURLWithPath: orphan))
        // Another family's session of the same identifier, whose record cannot be used.
        let skipped = layout.sessionsDirectory.appendingPathComponent("com.example.share")
            .appendingPathComponent(fixture.session.key.identifier.rawValue)
        try FileManager.default.createDirectory(at: skipped, withIntermediateDirectories: true)
        try Data("{not a record".utf8).write(to: skipped.appendingPathComponent("session.json"))

        let daemon = fixture.daemon
        CacheSweep.removeOrphans(of: daemon.sessions, layout: layout, root: daemon.root, log: daemon.log)
        #expect(FileManager.default.fileExists(atPath: orphan), "the skipped session's journal may name it")

        try FileManager.default.removeItem(at: skipped)
        CacheSweep.removeOrphans(of: daemon.sessions, layout: layout, root: daemon.root, log: daemon.log)
        #expect(!FileManager.default.fileExists(atPath: orphan), "with none skipped, a file no task names is swept")
    }
}
