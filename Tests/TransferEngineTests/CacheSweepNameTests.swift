import Foundation
import Testing
@testable import TransferEngine

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
