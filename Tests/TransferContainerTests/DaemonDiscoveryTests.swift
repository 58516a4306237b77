import Foundation
import Testing
import TransferContainer

/// Where a client looks for `transferd` when no daemon answers (issue 18): BGTRANSFER_TRANSFERD
/// alone when set, else beside the calling executable, else on PATH; none is an error naming
/// every place looked. Also the identity of a plain program.
struct DaemonDiscoveryTests {
    /// A folder with an executable `transferd` (or a plain file, when `executable` is false).
    private func folder(withDaemon: Bool, executable: Bool = true) throws -> URL {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("discovery-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        if withDaemon {
            let daemon = directory.appendingPathComponent("transferd")
            try Data("#!/bin/sh\n".utf8).write(to: daemon)
            try FileManager.default.setAttributes([.posixPermissions: executable ? 0o755 : 0o644], ofItemAtPath: daemon.path)
        }
        return directory
    }

    @Test("BGTRANSFER_TRANSFERD, when set, is the only place looked, even when it is wrong")
    func explicitWins() throws {
        let beside = try folder(withDaemon: true)
        defer { try? FileManager.default.removeItem(at: beside) }
        let caller = beside.appendingPathComponent("app").path
        let chosen = try folder(withDaemon: true)
        defer { try? FileManager.default.removeItem(at: chosen) }
        let explicit = chosen.appendingPathComponent("transferd").path
        #expect(try DaemonEndpoint.daemonExecutable(environment: ["BGTRANSFER_TRANSFERD": explicit], caller: caller) == explicit)
        #expect(throws: TransferFailure.self) { try DaemonEndpoint.daemonExecutable(environment: ["BGTRANSFER_TRANSFERD": "/nonexistent/transferd"], caller: caller) }
        do {
            _ = try DaemonEndpoint.daemonExecutable(environment: ["BGTRANSFER_TRANSFERD": "/nonexistent/transferd"], caller: caller)
        } catch {
            #expect(error.code == TransferFailure.cannotConnectToHost)
            #expect(error.message.contains("/nonexistent/transferd"))
        }
    }

    @Test("BGTRANSFER_TRANSFERD is refused, naming the path and the reason, unless it is absolute, and neither the file nor its folder is writable by group or others")
    func explicitMustBePrivate() throws {
        let chosen = try folder(withDaemon: true)
        defer { try? FileManager.default.removeItem(at: chosen) }
        let caller = "/nonexistent/app"
        let daemon = chosen.appendingPathComponent("transferd").path
        func refusal(_ path: String) -> String? {
            do { _ = try DaemonEndpoint.daemonExecutable(environment: ["BGTRANSFER_TRANSFERD": path], caller: caller); return nil } catch {
                #expect(error.code == TransferFailure.cannotConnectToHost && error.message.contains(path), "\(error.message)")
                return error.message
            }
        }
        #expect(refusal(daemon) == nil, "a private file in a private folder is used")
        try FileManager.default.setAttributes([.posixPermissions: 0o775], ofItemAtPath: daemon)
        #expect(refusal(daemon)?.contains("writable by group or others") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o757], ofItemAtPath: daemon)
        #expect(refusal(daemon)?.contains("writable by group or others") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: daemon)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: chosen.path)
        #expect(refusal(daemon)?.contains("its folder \(chosen.path) is writable by group or others") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: chosen.path)
        #expect(refusal("bin/transferd")?.contains("not an absolute path") == true)
        #expect(refusal(chosen.path)?.contains("not a regular file") == true)
        #expect(refusal("/nonexistent/transferd")?.contains("does not exist") == true)
    }

    @Test("Beside the calling executable first, then PATH; a file that is not executable does not count")
    func besideThenPath() throws {
        let beside = try folder(withDaemon: true)
        let onPath = try folder(withDaemon: true)
        let notExecutable = try folder(withDaemon: true, executable: false)
        let empty = try folder(withDaemon: false)
        defer { [beside, onPath, notExecutable, empty].forEach { try? FileManager.default.removeItem(at: $0) } }
        let path = "\(notExecutable.path):\(onPath.path)"
        #expect(try DaemonEndpoint.daemonExecutable(environment: ["PATH": path], caller: beside.appendingPathComponent("app").path) == beside.appendingPathComponent("transferd").path)
        #expect(try DaemonEndpoint.daemonExecutable(environment: ["PATH": path], caller: empty.appendingPathComponent("app").path) == onPath.appendingPathComponent("transferd").path)
        do {
            _ = try DaemonEndpoint.daemonExecutable(environment: ["PATH": notExecutable.path], caller: empty.appendingPathComponent("app").path)
            Issue.record("found a daemon where there is none")
        } catch {
            #expect(error.code == TransferFailure.cannotConnectToHost)
            #expect(error.message.contains(empty.appendingPathComponent("transferd").path) && error.message.contains(notExecutable.appendingPathComponent("transferd").path), "names every place looked: \(error.message)")
        }
    }

    @Test("transferd found through PATH is held to BGTRANSFER_TRANSFERD's rule: a world-writable one, or one in a world-writable folder, is refused naming it, not skipped")
    func pathMustBePrivate() throws {
        let planted = try folder(withDaemon: true)
        let good = try folder(withDaemon: true)
        let empty = try folder(withDaemon: false)
        defer { [planted, good, empty].forEach { try? FileManager.default.removeItem(at: $0) } }
        let daemon = planted.appendingPathComponent("transferd").path
        let caller = empty.appendingPathComponent("app").path
        let environment = ["PATH": "\(planted.path):\(good.path)"]
        func refusal() -> String? {
            do { _ = try DaemonEndpoint.daemonExecutable(environment: environment, caller: caller); return nil } catch {
                #expect(error.code == TransferFailure.cannotConnectToHost && error.subject == daemon,
                        "\(error.message)")
                return error.message
            }
        }
        #expect(refusal() == nil, "a private transferd in a private folder on PATH is used")
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: daemon)
        let file = refusal()
        #expect(file?.contains("\(daemon), found through PATH, is refused") == true, "\(file ?? "used")")
        #expect(file?.contains("writable by group or others") == true, "\(file ?? "used")")
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: daemon)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: planted.path)
        #expect(refusal()?.contains("its folder \(planted.path) is writable by group or others") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: planted.path)
    }

    @Test("A plain program is the app program.<name>, its own family, with no app groups; odd names are made valid")
    func programIdentity() throws {
        let plain = AppIdentity.program(executablePath: "/usr/local/bin/model-fetch")
        #expect(plain.bundleIdentifier.rawValue == "program.model-fetch")
        #expect(plain.kind == .app && plain.family == plain.bundleIdentifier && plain.appGroups.isEmpty)
        #expect(plain.containingAppExecutable == "model-fetch")
        #expect(AppIdentity.program(executablePath: "/opt/x/my tool.v2").bundleIdentifier.rawValue == "program.my_tool_v2")
        #expect(AppIdentity.program(executablePath: "/opt/x/" + String(repeating: "é", count: 300)).bundleIdentifier.rawValue.utf8.count <= SessionIdentifier.maximumLength)
        #expect(AppIdentity.program(executablePath: "/").bundleIdentifier.rawValue.hasPrefix("program."))
    }
}
