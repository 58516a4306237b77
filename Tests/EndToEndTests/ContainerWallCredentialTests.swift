import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

/// The daemon keeps an app's permanent credentials in the app's own container without
/// following a link planted on the way: a password never lands outside it (issue 28).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ContainerWallCredentialTests: InProcessSuite, @unchecked Sendable {
    @Test("Library/BackgroundTransfer in the app's container planted as a link to a folder outside: a .permanent credential is not written there, the download succeeds")
    func plantedCredentialFolder() throws {
        server.serve("/kept/a.bin", data: Data("a".utf8))
        server.protect("/kept", with: .basic(realm: "kept", users: ["alice": "correct horse"]))
        let outside = container.parent.appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        let folder = container.layout.privateContainer(InProcess.family).appendingPathComponent("Library/BackgroundTransfer")
        try FileManager.default.createDirectory(at: folder.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: folder, withDestinationURL: outside)

        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.useCredential, URLCredential(user: "alice", password: "correct horse", persistence: .permanent)) }
        let session = fixture.session("kept", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/kept/a.bin"))
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)), "a credential that cannot be kept fails no transfer: \(delegate.calls)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "the daemon wrote the app's credentials outside the container")
    }
}
}
