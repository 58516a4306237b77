import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

/// The daemon writes a download only inside the session's own cache folder: a symlink a
/// client plants there, in its place or on the way to it, is not written through, nor one in
/// place of an error page, an upload's answer or resume data's file (issue 28, item 7).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
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

    /// A folder outside the container; removed when the test ends.
    private func outsideFolder() throws -> URL {
        let outside = container.layout.root.deletingLastPathComponent().appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        return outside
    }

    /// Every file below `folder`, at any depth.
    private func files(below folder: URL) -> [String] {
        (FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder.appendingPathComponent(name).path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    @Test("A folder on the way to the cache folder (the group's Library) replaced by a symlink out: -3000, nothing written there")
    func symlinkedFolderOnTheWay() throws {
        server.serve("/big.bin", data: testPayload(size: 256 << 10))
        let outside = try outsideFolder()
        defer { try? FileManager.default.removeItem(at: outside) }
        let library = container.layout.appGroup(InProcess.group).appendingPathComponent("Library")
        try FileManager.default.createDirectory(at: library.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: library, withDestinationURL: outside)
        let delegate = RecordingDelegate()
        let session = fixture.session("onTheWay", delegate: delegate)
        defer { session.invalidateAndCancel() }

        let result = outcome(of: session.downloadTask(with: server.url(for: "/big.bin")), delegate)
        #expect(result.code == NSURLErrorCannotCreateFile)
        #expect(files(below: outside).isEmpty, "the daemon wrote through the symlinked Library: \(files(below: outside))")
    }

    @Test("An error page's file (task-N.partial.response) planted as a symlink is not written through: -3000, the file it points at unchanged")
    func plantedErrorPageSymlink() throws {
        server.serve("/gone", data: Data("an error page from the server\n".utf8), options: RouteOptions(status: 404))
        let victim = try outsideFile()
        let delegate = RecordingDelegate()
        let session = fixture.session("errorPage", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/gone"))
        let folder = cacheFolder("errorPage")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let page = folder.appendingPathComponent("task-\(task.taskIdentifier).partial.response")
        try FileManager.default.createSymbolicLink(at: page, withDestinationURL: victim.url)

        let result = outcome(of: task, delegate)
        #expect(result.code == NSURLErrorCannotCreateFile)
        #expect(result.subject == page.path)
        #expect(try Data(contentsOf: victim.url) == victim.contents, "the daemon wrote the error page through the symlink")
    }

    @Test("An upload's answer file (task-N.upload-response) planted as a symlink is not written through: -3000, the file it points at unchanged")
    func plantedUploadResponseSymlink() throws {
        server.acceptUploads(at: "/put")
        let victim = try outsideFile()
        let body = container.layout.appGroup(InProcess.group).appendingPathComponent("Outbox/body.bin")
        try FileManager.default.createDirectory(at: body.deletingLastPathComponent(), withIntermediateDirectories: true)
        try testPayload(size: 4096).write(to: body)
        let delegate = RecordingDelegate()
        let session = fixture.session("answer", delegate: delegate)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/put"))
        request.httpMethod = "PUT"
        let task = session.uploadTask(with: request, fromFile: body)
        try FileManager.default.createDirectory(at: cacheFolder("answer"), withIntermediateDirectories: true)
        let answer = cacheFolder("answer").appendingPathComponent("task-\(task.taskIdentifier).upload-response")
        try FileManager.default.createSymbolicLink(at: answer, withDestinationURL: victim.url)

        let result = outcome(of: task, delegate)
        #expect(result.code == NSURLErrorCannotCreateFile)
        #expect(result.subject == answer.path)
        #expect(try Data(contentsOf: victim.url) == victim.contents, "the daemon wrote the server's answer through the symlink")
    }

    @Test("Resume data whose partial file was replaced by a symlink out is refused, naming the file; the file it points at unchanged")
    func symlinkedResumeDataFile() throws {
        var options = RouteOptions()
        options.bytesPerSecond = 1 << 20
        server.serve("/resumable.bin", data: testPayload(size: 2 << 20), options: options)
        let victim = try outsideFile()
        let delegate = RecordingDelegate()
        let session = fixture.session("resume", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let first = session.downloadTask(with: server.url(for: "/resumable.bin"))
        first.resume()
        let cancelled = cancelPartWay(first, after: 256 << 10)
        let blob = try #require(cancelled.data, "resume data was made")
        let folder = cacheFolder("resume")
        let kept = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasPrefix("resume-") && $0.hasSuffix(".partial") })
        let keptPath = folder.appendingPathComponent(kept)
        try FileManager.default.removeItem(at: keptPath)
        try FileManager.default.createSymbolicLink(at: keptPath, withDestinationURL: victim.url)

        let result = outcome(of: session.downloadTask(withResumeData: blob), delegate)
        #expect(result.code == NSURLErrorCannotOpenFile)
        #expect(result.subject.map { keptPath.path.hasSuffix($0) } == true, "\(String(describing: result.subject))")
        #expect(try Data(contentsOf: victim.url) == victim.contents, "the daemon wrote the download through the symlink")
    }
}
}
