import Foundation
import Glibc
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer

/// Which files a background upload may start from (S2.1, "the file belongs to the app").
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class UploadSourceTests: InProcessSuite, @unchecked Sendable {
    /// A file of `size` bytes in the test app group.
    private func groupFile(_ name: String, size: Int = 4096) throws -> URL {
        let directory = container.layout.appGroup(InProcess.group).appendingPathComponent("Outbox")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent(name)
        try testPayload(size: size).write(to: file)
        return file
    }

    /// Starts an upload of `file` and returns the error code and subject it completed with.
    private func failure(uploading file: URL, session name: String) -> (code: Int?, subject: String?) {
        let delegate = RecordingDelegate()
        let session = fixture.session(name, delegate: delegate)
        var request = URLRequest(url: server.url(for: "/never"))
        request.httpMethod = "PUT"
        let task = session.uploadTask(with: request, fromFile: file)
        #expect(task.state == .suspended)
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, _, _) = $0 { return true } else { return false } })
        let error = delegate.errors[task.taskIdentifier] as NSError?
        session.invalidateAndCancel()
        return (error?.code, error?.userInfo[BackgroundTransferErrorSubjectKey] as? String)
    }

    @Test("A missing file fails with -1100, a directory with -1101, naming the path; nothing reaches the server")
    func missingOrDirectory() throws {
        let missing = container.layout.appGroup(InProcess.group).appendingPathComponent("no-such-file.bin")
        let outcome = failure(uploading: missing, session: "missing")
        #expect(outcome.code == NSURLErrorFileDoesNotExist)
        #expect(outcome.subject == missing.path)

        let directory = try groupFile("placeholder").deletingLastPathComponent()
        #expect(failure(uploading: directory, session: "directory").code == NSURLErrorFileIsDirectory)
        #expect(server.requests.isEmpty)
    }

    @Test("An unreadable file, a file outside the app's containers, and a symlink out of them fail with -1102")
    func unreadableOrForeign() throws {
        let locked = try groupFile("locked.bin")
        chmod(locked.path, 0)
        defer { chmod(locked.path, 0o600) }
        #expect(failure(uploading: locked, session: "locked").code == NSURLErrorNoPermissionsToReadFile)

        let outside = container.layout.root.deletingLastPathComponent().appendingPathComponent("outside.bin")
        try testPayload(size: 1024).write(to: outside)
        #expect(failure(uploading: outside, session: "outside").code == NSURLErrorNoPermissionsToReadFile)

        let link = container.layout.appGroup(InProcess.group).appendingPathComponent("Outbox/escape.bin")
        try? FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: outside)
        #expect(failure(uploading: link, session: "symlink").code == NSURLErrorNoPermissionsToReadFile)
        #expect(server.requests.isEmpty)
    }

    @Test("A hard link in the app's container to a file outside it fails with -1102, naming the path; nothing reaches the server")
    func hardLinkOut() throws {
        let outside = container.layout.root.deletingLastPathComponent().appendingPathComponent("private-\(UUID().uuidString).bin")
        try testPayload(size: 1024).write(to: outside)
        defer { unlink(outside.path) }
        let link = container.layout.appGroup(InProcess.group).appendingPathComponent("Outbox/linked.bin")
        try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
        #expect(Glibc.link(outside.path, link.path) == 0)
        let outcome = failure(uploading: link, session: "hardlink")
        #expect(outcome.code == NSURLErrorNoPermissionsToReadFile)
        #expect(outcome.subject == link.path)
        #expect(server.requests.isEmpty)
    }

    @Test("A readable file in the app's container that belongs to another user (uid 65534) fails with -1102",
          .enabled(if: geteuid() == 0, "chown to another uid needs root"))
    func anotherUsersFile() throws {
        let foreign = try groupFile("nobodys.bin")
        #expect(chmod(foreign.path, 0o644) == 0)
        #expect(chown(foreign.path, 65534, 65534) == 0, "errno \(errno)")
        let outcome = failure(uploading: foreign, session: "nobodys")
        #expect(outcome.code == NSURLErrorNoPermissionsToReadFile, "the app runs as its own user, not as 65534")
        #expect(outcome.subject == foreign.path)
        #expect(server.requests.isEmpty)
    }

    @Test("An upload to an ftp: URL fails with -1002 when resumed")
    func unsupportedScheme() throws {
        let file = try groupFile("ftp.bin")
        let delegate = RecordingDelegate()
        let session = fixture.session("ftp", delegate: delegate)
        let task = session.uploadTask(with: URLRequest(url: URL(string: "ftp://127.0.0.1/x")!), fromFile: file)
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: NSURLErrorUnsupportedURL, status: nil) }, "\(delegate.calls)")
        session.invalidateAndCancel()
    }
}
}
