import Foundation
import TestPeers
import Testing

/// The test certificates (private keys included) do not outlive the process that made them
/// (issue 45 §4): removed when it exits, and, when it did not exit (killed), by the next
/// process that makes certificates. A real child process: this test bundle, run again.
@Suite(.serialized) struct TestCertificatesCleanupTests {
    /// Run in the child only: makes the certificates, says where, and exits.
    @Test("(child) makes the test certificates and exits, when BT_CERTS_CHILD is set")
    func child() throws {
        guard ProcessInfo.processInfo.environment["BT_CERTS_CHILD"] != nil else { return }
        let certificates = try TestCertificates.shared.get()
        let attributes = try FileManager.default.attributesOfItem(atPath: certificates.directory.path)
        let mode = String((attributes[.posixPermissions] as? Int) ?? 0, radix: 8)
        print("CERTS=\(certificates.directory.path) MODE=\(mode)")
    }

    @Test("A process that made certificates leaves no bt-certs folder when it exits, and the folder was 0700")
    func removedAtExit() throws {
        let output = FileManager.default.temporaryDirectory
            .appendingPathComponent("certs-child-\(UUID().uuidString.prefix(8)).out")
        defer { try? FileManager.default.removeItem(at: output) }
        FileManager.default.createFile(atPath: output.path, contents: nil)
        let child = Process()
        child.executableURL = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0])
        child.arguments = ["--testing-library", "swift-testing", "--filter", "TestCertificatesCleanupTests/child"]
        child.environment = ProcessInfo.processInfo.environment.merging(["BT_CERTS_CHILD": "1"]) { $1 }
        child.standardOutput = try FileHandle(forWritingTo: output)
        let exited = DispatchSemaphore(value: 0)
        child.terminationHandler = { _ in exited.signal() }
        try child.run()
        if exited.wait(timeout: .now() + 120) == .timedOut {
            kill(child.processIdentifier, SIGKILL)
            Issue.record("the child did not exit within 120 s")
            return
        }
        let text = try String(contentsOf: output, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("CERTS=") }, "child said: \(text)")
        let words = line.split(separator: " ")
        let folder = String(words[0].dropFirst("CERTS=".count))
        #expect(folder.contains("bt-certs-\(child.processIdentifier)-"), "\(folder)")
        #expect(words.last == "MODE=700", "\(line)")
        #expect(!FileManager.default.fileExists(atPath: folder), "\(folder) outlived its process")
    }

    @Test("Folders of processes that are gone are removed, with their keys; those of live processes stay")
    func leftoversOfDeadProcesses() throws {
        let tmp = FileManager.default.temporaryDirectory
            .appendingPathComponent("certs-tmp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: tmp) }
        // A pid that is gone: a child that has exited and been reaped.
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        let exited = DispatchSemaphore(value: 0)
        gone.terminationHandler = { _ in exited.signal() }
        try gone.run()
        try #require(exited.wait(timeout: .now() + 30) == .success, "/bin/true did not exit")
        let dead = tmp.appendingPathComponent("bt-certs-\(gone.processIdentifier)-deadbeef")
        let live = tmp.appendingPathComponent("bt-certs-\(getppid())-cafebabe")
        let other = tmp.appendingPathComponent("bt-certs-notapid")
        for folder in [dead, live, other] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data("key".utf8).write(to: folder.appendingPathComponent("leaf.key"))
        }
        let removed = TestCertificates.removeLeftovers(in: tmp)
        #expect(removed == [dead.path])
        #expect(!FileManager.default.fileExists(atPath: dead.path))
        #expect(FileManager.default.fileExists(atPath: live.path) && FileManager.default.fileExists(atPath: other.path))
    }
}
