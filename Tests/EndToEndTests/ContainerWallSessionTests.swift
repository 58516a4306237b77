import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer

/// The daemon makes a session's folder under `Sessions/`, and reads and writes its
/// `session.json`, without following a symlink a program planted on the way: a session whose
/// folder would land outside the container is refused before anything is written (issue 28).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ContainerWallSessionTests: InProcessSuite, @unchecked Sendable {
    /// Every path below `folder`, at any depth.
    private func files(below folder: URL) -> [String] {
        FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []
    }

    @Test("Sessions/<app family> planted as a link to a folder outside: the new session's task fails, the daemon writes nothing outside")
    func plantedFamilyFolder() throws {
        server.serve("/small.bin", data: testPayload(size: 4096))
        let outside = container.parent.appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        let family = container.layout.sessionsDirectory.appendingPathComponent(InProcess.app.bundleIdentifier.rawValue)
        try? FileManager.default.removeItem(at: family)
        try FileManager.default.createDirectory(at: family.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: family, withDestinationURL: outside)

        let delegate = RecordingDelegate()
        let session = fixture.session("planted", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/small.bin"))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, _, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        // -3003: the code the daemon gives for a change it cannot record (README "A full disk").
        #expect((delegate.errors[task.taskIdentifier] as NSError?)?.code == NSURLErrorCannotWriteToFile, "the task failed with -3003: \(delegate.calls)")
        // The client library takes its lock there with its own rights; the daemon writes nothing.
        let written = Set(files(below: outside)).subtracting(["planted", "planted/session.lock"])
        #expect(written.isEmpty, "the daemon wrote the session's records outside the container: \(written.sorted())")
    }
}
}
