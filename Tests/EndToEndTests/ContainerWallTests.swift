import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

/// The daemon writes a download only inside the session's own cache folder: a symlink a
/// client plants there, or in its place, is not written through (issue 28, item 7).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(5)))
final class ContainerWallTests: InProcessSuite, @unchecked Sendable {
    private func cacheFolder(_ session: String) -> URL {
        container.layout.appGroup(InProcess.group).appendingPathComponent("Library/Caches/BackgroundTransfer/\(session)")
    }

    /// A file outside the container, with known contents.
    private func outsideFile() throws -> (url: URL, contents: Data) {
        let url = container.layout.root.deletingLastPathComponent().appendingPathComponent("victim-\(UUID().uuidString).txt")
        let contents = Data("the host's own data\n".utf8)
        try contents.write(to: url)
        return (url, contents)
    }

    /// Resumes `task` and returns the error code and subject it completed with.
    private func outcome(of task: URLSessionTask, _ delegate: RecordingDelegate) -> (code: Int?, subject: String?) {
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, _, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        let error = delegate.errors[task.taskIdentifier] as NSError?
        return (error?.code, error?.userInfo[BackgroundTransferErrorSubjectKey] as? String)
    }

    @Test("A task-N.partial symlink planted in the cache folder is not written through: -3000 naming it, the file it points at unchanged")
    func plantedPartialSymlink() throws {
        server.serve("/big.bin", data: testPayload(size: 256 << 10))
        let victim = try outsideFile()
        let delegate = RecordingDelegate()
        let session = fixture.session("planted", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/big.bin"))
        let folder = cacheFolder("planted")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let partial = folder.appendingPathComponent("task-\(task.taskIdentifier).partial")
        try FileManager.default.createSymbolicLink(at: partial, withDestinationURL: victim.url)

        let result = outcome(of: task, delegate)
        #expect(result.code == NSURLErrorCannotCreateFile)
        #expect(result.subject == partial.path)
        #expect(try Data(contentsOf: victim.url) == victim.contents, "the daemon wrote the download through the symlink")
    }

    @Test("A cache folder replaced by a symlink to a folder outside receives nothing there: -3000")
    func symlinkedCacheFolder() throws {
        server.serve("/big.bin", data: testPayload(size: 256 << 10))
        let outside = container.layout.root.deletingLastPathComponent().appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        let folder = cacheFolder("moved")
        try FileManager.default.createDirectory(at: folder.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: folder, withDestinationURL: outside)
        let delegate = RecordingDelegate()
        let session = fixture.session("moved", delegate: delegate)
        defer { session.invalidateAndCancel() }

        let result = outcome(of: session.downloadTask(with: server.url(for: "/big.bin")), delegate)
        #expect(result.code == NSURLErrorCannotCreateFile)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "the daemon wrote into the folder the symlink points at")
    }
}
}
