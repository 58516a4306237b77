import Foundation
import Glibc
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer

/// A symlink that stays inside the container is not followed either (`RESOLVE_NO_SYMLINKS`,
/// not only `RESOLVE_BENEATH`): an app that makes its cache folder a link to another app's
/// private folder does not get the daemon to write there.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ContainerWallSymlinkInsideTests: InProcessSuite, @unchecked Sendable {
    @Test("""
        The app group's download cache folder made a relative symlink to another app's private \
        folder: the download does not write there, and that folder stays as it was
        """)
    func downloadCacheSymlinkedToAnotherApp() throws {
        let files = FileManager.default
        let other = try BundleIdentifier("com.example.other")
        let target = container.layout.privateContainer(other).appendingPathComponent("Library/Caches")
        try files.createDirectory(at: target, withIntermediateDirectories: true)
        let kept = Data("the other app's own file".utf8)
        try kept.write(to: target.appendingPathComponent("untouched.txt"))
        // The session's folder there too, so that a way through the link would open at once.
        let sessionFolder = target.appendingPathComponent("symlinked-cache")
        try files.createDirectory(at: sessionFolder, withIntermediateDirectories: true)
        // <group>/Library/Caches/BackgroundTransfer -> ../../../../Apps/<other>/Library/Caches:
        // beneath the container's root all the way, through a folder that is a symlink.
        let caches = container.layout.appGroup(InProcess.group).appendingPathComponent("Library/Caches")
        try files.createDirectory(at: caches, withIntermediateDirectories: true)
        let link = caches.appendingPathComponent("BackgroundTransfer")
        try? files.removeItem(at: link)
        try files.createSymbolicLink(atPath: link.path,
                                     withDestinationPath: "../../../../Apps/\(other.rawValue)/Library/Caches")
        let throughLink = files.contents(atPath: link.appendingPathComponent("untouched.txt").path)
        #expect(throughLink == kept, "the link leads there")

        server.serve("/file.bin", data: testPayload(size: 64 * 1024))
        let delegate = RecordingDelegate()
        let session = fixture.session("symlinked-cache", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/file.bin"))
        task.resume()
        var code: Int?? = nil
        #expect(delegate.wait {
            guard case .completed(task.taskIdentifier, let error, _) = $0 else { return false }
            code = .some(error)
            return true
        })
        // Through the link, the download would be written in the other app's folder (and
        // removed from there once delivered): it must fail instead.
        #expect(code != nil && code != .some(nil), "the download went through the link: \(delegate.calls)")

        let names = try files.contentsOfDirectory(atPath: target.path)
        #expect(names.sorted() == ["symlinked-cache", "untouched.txt"], "the daemon made \(names) there")
        let written = try files.contentsOfDirectory(atPath: sessionFolder.path)
        #expect(written.isEmpty, "the daemon wrote \(written) in the other app's folder")
        #expect(files.contents(atPath: target.appendingPathComponent("untouched.txt").path) == kept)
        #expect(try files.destinationOfSymbolicLink(atPath: link.path).hasPrefix("../"), "the link itself left alone")
    }
}
}
