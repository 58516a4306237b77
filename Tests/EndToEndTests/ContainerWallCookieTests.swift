import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

extension InProcess {
/// The daemon reads and writes an app group's cookie store (`Library/Cookies/Cookies.json`)
/// without following a link a program of the group planted there: not out to a file or a
/// folder elsewhere. The transfer itself goes on; the store is just not used (issue 28).
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ContainerWallCookieTests: InProcessSuite, @unchecked Sendable {
    private var store: URL { container.layout.cookieJar(CookieSettings(appGroup: InProcess.group), owner: InProcess.app.bundleIdentifier) }

    /// A folder outside the container; the caller removes it.
    private func outsideFolder() throws -> URL {
        let outside = container.layout.root.deletingLastPathComponent().appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        return outside
    }

    /// Downloads `/login`, whose response sets a cookie, in a session using the group's store;
    /// expects it to succeed and returns the `Cookie` field the request carried.
    private func downloadSettingACookie(_ name: String) -> String? {
        var setsCookie = RouteOptions()
        setsCookie.extraHeaders = [("Set-Cookie", "token=abc123; Path=/")]
        server.serve("/login", data: Data("welcome".utf8), options: setsCookie)
        let delegate = RecordingDelegate()
        let session = fixture.session(name, delegate: delegate) { configuration in
            configuration.httpCookieStorage = HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: InProcess.group.rawValue)
        }
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/login"))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, 200) = $0 { return true } else { return false } }, "a store the daemon cannot use fails no transfer: \(delegate.calls)")
        return server.requests.last { $0.path == "/login" }?.headers["Cookie"]
    }

    @Test("Cookies.json and its lock planted as links out of the container: the cookie outside is not sent, the file outside is unchanged, no lock is made outside, the download succeeds")
    func plantedStoreLinks() throws {
        let outside = try outsideFolder()
        defer { try? FileManager.default.removeItem(at: outside) }
        let host = server.url(for: "/").host ?? "127.0.0.1"
        let victim = outside.appendingPathComponent("someone-elses-cookies.json")
        let contents = Data(#"[{"name":"stolen","value":"secret","domain":"\#(host)","path":"/","secure":false,"httpOnly":false}]"#.utf8)
        try contents.write(to: victim)
        try FileManager.default.createDirectory(at: store.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: store, withDestinationURL: victim)
        let lockTarget = outside.appendingPathComponent("made-by-the-daemon.lock")
        try FileManager.default.createSymbolicLink(at: URL(fileURLWithPath: store.path + ".lock"), withDestinationURL: lockTarget)

        let sent = downloadSettingACookie("plantedStore")
        #expect(sent?.contains("stolen") != true, "the daemon read a cookie store outside the container: \(sent ?? "")")
        #expect(try Data(contentsOf: victim) == contents, "the daemon wrote through the planted Cookies.json")
        #expect(!FileManager.default.fileExists(atPath: lockTarget.path), "the daemon made its lock file outside the container")
    }

    @Test("The Cookies folder planted as a link to a folder outside: nothing is written there, the download succeeds")
    func plantedCookiesFolder() throws {
        let outside = try outsideFolder()
        defer { try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.createDirectory(at: store.deletingLastPathComponent().deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: store.deletingLastPathComponent(), withDestinationURL: outside)

        _ = downloadSettingACookie("plantedFolder")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty, "the daemon wrote its cookie store into the folder the link points at")
    }
}
}
