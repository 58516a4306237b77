import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// Resume data names its file relative to the container, so that resume data kept in an
/// event (a force quit's cancellation) still works in a container copied or moved elsewhere.
@Suite final class ResumeDataPathTests {
    let root: URL
    let layout: ContainerLayout
    let daemon: TransferDaemon
    let session: DaemonSession
    static let group = try! BundleIdentifier("group.com.example.transfers")
    static let family = try! BundleIdentifier("com.example.host")
    let identity = AppIdentity(bundleIdentifier: family, kind: .app, containingApp: family, containingAppExecutable: "host-app", appGroups: [group])
    var group: BundleIdentifier { Self.group }

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("resume-paths-\(UUID().uuidString)").appendingPathComponent("moved")
        layout = ContainerLayout(root: root)
        var options = TransferDaemon.Options(layout: layout)
        options.echoLevel = nil
        daemon = try TransferDaemon(options: options)
        var configuration = SessionConfiguration()
        configuration.sharedContainerIdentifier = Self.group
        let record = SessionRecord(identifier: try SessionIdentifier("com.example.host.background"), owner: Self.family, family: Self.family, configuration: configuration, createdAt: Date(timeIntervalSince1970: 1_700_000_000))
        session = try DaemonSession(layout: layout, log: daemon.log, record: record)
    }

    deinit {
        try? FileManager.default.removeItem(at: root.deletingLastPathComponent())
    }

    private func downloadTask(_ identifier: Int) -> TaskRecord {
        var task = TaskRecord(taskIdentifier: identifier, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/file"))
        task.validator = Validator(entityTag: "\"v1\"", lastModified: nil)
        task.response = ResponseRecord(url: "http://127.0.0.1:9/file", statusCode: 200, headers: ["Accept-Ranges": "bytes", "ETag": "\"v1\""])
        task.countOfBytesReceived = 5
        task.countOfBytesExpectedToReceive = 10
        return task
    }

    @Test("Resume data the daemon makes names its partial file relative to the container; taken back, that file is found under this container's root")
    func relativePartialFile() throws {
        let task = downloadTask(1)
        try DurableFile.makeDirectory(session.downloadsDirectory)
        try Data("12345".utf8).write(to: URL(fileURLWithPath: session.partialPath(for: task)))
        let blob = try #require(daemon.resumeData.makeResumeData(for: task, in: session))
        let resume = try ResumeData(decoding: blob)
        #expect(!resume.partialFile.hasPrefix("/") && resume.partialFile.hasPrefix("AppGroups/\(group)/"), "\(resume.partialFile)")

        var resumed = downloadTask(2)
        #expect(daemon.resumeData.adoptResumeData(blob, into: &resumed, in: session, for: identity) == nil)
        #expect(resumed.countOfBytesReceived == 5)
        #expect(FileManager.default.contents(atPath: session.partialPath(for: resumed)) == Data("12345".utf8))
    }

    @Test("Resume data whose relative path climbs out of the container is refused as foreign")
    func climbingPathRefused() throws {
        let outside = root.deletingLastPathComponent().appendingPathComponent("outside.partial")
        try Data("12345".utf8).write(to: outside)
        let blob = ResumeData(url: "http://127.0.0.1:9/file", bytesReceived: 5, expectedTotalBytes: 10, entityTag: "\"v1\"", lastModified: nil,
                              partialFile: "AppGroups/\(group)/../../../outside.partial", requestHeaders: []).encoded()
        var task = downloadTask(3)
        let refusal = daemon.resumeData.adoptResumeData(blob, into: &task, in: session, for: identity)
        #expect(refusal?.code == TransferFailure.cannotDecodeContentData, "\(String(describing: refusal))")
        #expect(FileManager.default.fileExists(atPath: outside.path), "left where it was")
    }
}
