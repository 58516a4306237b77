import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests
import HTTPFormats

/// A resource that changes while it is downloaded, on a server that ignores `If-Range`: the
/// resume is answered `206` with the new version's tail. The bytes on disk are of the old
/// version, so the download starts over and delivers the new version whole, never the old
/// head spliced to the new tail (issue 26).
enum ChangedResource {
    /// 2 MiB + 1 byte, cut at exactly 1 MiB: the resume asks for `bytes=1048576-`.
    static let size = (2 << 20) + 1
    static let cut: Int64 = 1 << 20
    static let old = testPayload(size: size, seed: 261)
    static let new = testPayload(size: size, seed: 262)

    /// Serves `path` as a resource that changes after its first (interrupted) response.
    static func serve(_ path: String, on server: LoopbackServer, validators: VersionChange.Validators, interruption: VersionChange.Interruption = .drop) -> VersionChange {
        let change = VersionChange(old: old, new: new, validators: validators, cutAfterBytes: cut, interruption: interruption)
        var options = RouteOptions()
        options.versionChange = change
        server.serve(path, data: old, options: options)
        return change
    }
}

extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ChangedResourceTests: InProcessSuite, @unchecked Sendable {

    private func isCompletion(of task: URLSessionTask) -> (RecordingDelegate.Call) -> Bool {
        { if case .completed(task.taskIdentifier, _, _) = $0 { return true } else { return false } }
    }

    @Test("A background download cut off and resumed against a changed resource delivers the new version whole, HTTP 200",
          arguments: [VersionChange.Validators.entityTags, .entityTagThenNone, .lastModified])
    func retriedDownload(_ validators: VersionChange.Validators) throws {
        _ = ChangedResource.serve("/changing.bin", on: server, validators: validators)
        let delegate = RecordingDelegate()
        let session = fixture.session("changing", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/changing.bin"))
        task.resume()
        #expect(delegate.wait(timeout: 60, for: isCompletion(of: task)), "\(delegate.calls)")
        #expect(delegate.calls.contains(.completed(task: task.taskIdentifier, code: nil, status: 200)), "\(delegate.calls)")
        #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(ChangedResource.size))), "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: ChangedResource.new), "the new version, byte for byte")

        // The resume named the old version; after the server's lie the whole resource was asked for.
        let requests = server.requests.filter { $0.path == "/changing.bin" }
        try #require(requests.count == 3, "\(requests.map { ($0.header("Range"), $0.header("If-Range")) })")
        #expect(requests[1].header("Range") == "bytes=\(ChangedResource.cut)-")
        if validators == .lastModified {
            #expect(requests[1].header("If-Range").flatMap(HTTPDate.parse) != nil, "the old version's date")
        } else {
            #expect(requests[1].header("If-Range") == "\"v1\"")
        }
        #expect(requests[2].header("Range") == nil && requests[2].header("If-Range") == nil)
        session.invalidateAndCancel()
    }

    /// Resume data made at the cut from the old version, resumed against the new one: the
    /// download starts over, says so with didResumeAtOffset 0, and delivers the new version whole.
    private func resumeAcrossChange(in session: URLSession, delegate: RecordingDelegate) throws {
        _ = ChangedResource.serve("/changing.bin", on: server, validators: .entityTags, interruption: .stall)
        let first = session.downloadTask(with: server.url(for: "/changing.bin"))
        first.resume()
        let data = try #require(cancelPartWay(first, after: ChangedResource.cut).data, "resume data from the old version's bytes")
        let second = session.downloadTask(withResumeData: data)
        second.resume()
        #expect(delegate.wait(timeout: 60, for: isCompletion(of: second)), "\(delegate.calls)")
        #expect(delegate.calls.contains(.completed(task: second.taskIdentifier, code: nil, status: 200)), "\(delegate.calls) \(String(describing: delegate.errors[second.taskIdentifier]))")
        let resumes = delegate.calls.filter { if case .resumed(second.taskIdentifier, _, _) = $0 { return true } else { return false } }
        #expect(resumes == [.resumed(task: second.taskIdentifier, offset: 0, expected: Int64(ChangedResource.size))], "\(delegate.calls)")
        #expect(delegate.digests[second.taskIdentifier] == SHA256.hexDigest(of: ChangedResource.new))
        let requests = server.requests.filter { $0.path == "/changing.bin" }
        #expect(requests.map { $0.header("Range") } == [nil, "bytes=\(ChangedResource.cut)-", nil], "asked for the rest, then for the whole")
    }

    @Test("Resume data against a changed resource: didResumeAtOffset 0, then the new version whole, HTTP 200")
    func backgroundResumeData() throws {
        let delegate = RecordingDelegate()
        let session = fixture.session("changing-resume", delegate: delegate)
        try resumeAcrossChange(in: session, delegate: delegate)
        session.invalidateAndCancel()
    }

    @Test("A default session's resume data against a changed resource: didResumeAtOffset 0, the new version whole, no error")
    func defaultSessionResumeData() throws {
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        try resumeAcrossChange(in: session, delegate: delegate)
        session.finishTasksAndInvalidate()
    }
}
}

/// The same, with real processes only: the stand-in extension waits for its download.
@Suite(.timeLimit(.minutes(20)))
struct ChangedResourceProcessTests {
    @Test("fetch-extension --wait against a server that ignores If-Range while the file changes saves the new version whole")
    func standInSavesNewVersion() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let change = ChangedResource.serve("/files/changing.bin", on: server, validators: .entityTags)
        _ = try DaemonUnderTest.start(container)

        let outcome = try Executable.fetchExtension.run(["download", server.url(for: "/files/changing.bin").absoluteString, "--wait"], in: container)
        #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
        #expect(change.responses == 3, "the first answer, the lying 206, the whole new version")
        let saved = try Data(contentsOf: container.downloads.appendingPathComponent("changing.bin"))
        #expect(saved.count == ChangedResource.size)
        // Compared as a Bool: Swift Testing would diff two 2 MiB values element by element.
        let isNew = saved == ChangedResource.new
        let startsOld = saved.prefix(Int(ChangedResource.cut)) == ChangedResource.old.prefix(Int(ChangedResource.cut))
        #expect(isNew, "the new version, byte for byte (begins with the old version's bytes: \(startsOld))")
    }
}
