import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import TransferPOSIX

extension InProcess {
/// S9.4 in background sessions: the daemon sends cookies from, and keeps `Set-Cookie` in,
/// the session's cookie store in the container, as `httpShouldSetCookies` and
/// `httpCookieAcceptPolicy` say. A real daemon, a real loopback server.
@Suite(.serialized, .timeLimit(.minutes(20)))
final class BackgroundCookieTests: InProcessSuite, @unchecked Sendable {
    /// The test app group's cookie store, as the daemon keeps it.
    var groupJar: URL { container.layout.cookieJar(CookieSettings(appGroup: InProcess.group), owner: InProcess.app.bundleIdentifier) }

    /// `/login` sets a cookie, `/next` does not.
    func serveCookieRoutes() {
        var setsCookie = RouteOptions()
        setsCookie.extraHeaders = [("Set-Cookie", "token=abc123; Path=/")]
        server.serve("/login", data: Data("welcome".utf8), options: setsCookie)
        server.serve("/next", data: Data("next".utf8))
    }

    /// Downloads `path` in `session` and waits for didCompleteWithError.
    func download(_ path: String, in session: URLSession, delegate: RecordingDelegate) -> URLSessionTask {
        let task = session.downloadTask(with: server.url(for: path))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, 200) = $0 { return true } else { return false } }, "\(path): \(delegate.calls)")
        return task
    }

    func cookieSent(to path: String) -> String? {
        server.requests.last { $0.path == path }?.headers["Cookie"]
    }

    func groupSession(_ name: String, delegate: RecordingDelegate, configure: @escaping (URLSessionConfiguration) -> Void = { _ in }) -> URLSession {
        fixture.session(name, delegate: delegate) { configuration in
            configuration.httpCookieStorage = HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: InProcess.group.rawValue)
            configure(configuration)
        }
    }

    @Test("A cookie the server sets on a background download is kept in the app group's store and sent with the next task, of this session and of another session of the group")
    func cookieSentWithNextTask() throws {
        serveCookieRoutes()
        let delegate = RecordingDelegate()
        let session = groupSession("cookies-first", delegate: delegate)
        _ = download("/login", in: session, delegate: delegate)
        #expect(cookieSent(to: "/login") == nil, "no cookie before the server set one")
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == "token=abc123")
        #expect(FileManager.default.fileExists(atPath: groupJar.path), "kept in the group's container")

        let otherDelegate = RecordingDelegate()
        let other = groupSession("cookies-second", delegate: otherDelegate)
        _ = download("/next", in: other, delegate: otherDelegate)
        #expect(server.requests.filter { $0.path == "/next" }.map { $0.headers["Cookie"] } == ["token=abc123", "token=abc123"], "another session of the group sends it too")
        session.invalidateAndCancel()
        other.invalidateAndCancel()
    }

    @Test("The group's store is shared with default sessions: a cookie the daemon kept is sent by a default session's data task of this process, and one such a task got is sent by the next background download")
    func sharedWithDefaultSessions() throws {
        // Values of this run only: corelibs' own storage object outlives a test in this process.
        let fromDaemon = "bg\(UUID().uuidString.prefix(8))", fromDataTask = "fg\(UUID().uuidString.prefix(8))"
        var setsFirst = RouteOptions(), setsSecond = RouteOptions()
        setsFirst.extraHeaders = [("Set-Cookie", "daemon=\(fromDaemon); Path=/")]
        setsSecond.extraHeaders = [("Set-Cookie", "datatask=\(fromDataTask); Path=/")]
        server.serve("/login-background", data: Data("a".utf8), options: setsFirst)
        server.serve("/login-default", data: Data("b".utf8), options: setsSecond)
        server.serve("/check", data: Data("c".utf8))
        let delegate = RecordingDelegate()
        let background = groupSession("cookies-shared", delegate: delegate)
        _ = download("/login-background", in: background, delegate: delegate)

        let configuration = URLSessionConfiguration.default
        configuration.httpCookieStorage = HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: InProcess.group.rawValue)
        let foreground = URLSession(configuration: configuration)
        for path in ["/check", "/login-default"] {
            let done = DispatchSemaphore(value: 0)
            let status = Locked<Int?>(nil)
            foreground.dataTask(with: server.url(for: path)) { _, response, _ in
                status.withLock { $0 = (response as? HTTPURLResponse)?.statusCode }
                done.signal()
            }.resume()
            #expect(done.wait(timeout: .now() + 20) == .success && status.withLock { $0 } == 200, "\(path)")
        }
        #expect(cookieSent(to: "/check")?.contains("daemon=\(fromDaemon)") == true, "\(cookieSent(to: "/check") ?? "no Cookie field")")

        _ = download("/check", in: background, delegate: delegate)
        #expect(cookieSent(to: "/check")?.contains("datatask=\(fromDataTask)") == true, "\(cookieSent(to: "/check") ?? "no Cookie field")")
        background.invalidateAndCancel()
        foreground.invalidateAndCancel()
    }

    @Test("A cookie set on a 302 is stored and sent to the redirect target on the same host, and with the next task; not to a redirect target on another host")
    func cookieFromRedirect() throws {
        var hop = RouteOptions(redirectTo: "/landing")
        hop.extraHeaders = [("Set-Cookie", "hop=from302; Path=/")]
        server.serve("/hop", data: Data(), options: hop)
        server.serve("/landing", data: Data("landed".utf8))
        server.serve("/next", data: Data("next".utf8))
        var away = RouteOptions(redirectTo: "http://localhost:\(server.port)/landing")
        away.extraHeaders = [("Set-Cookie", "away=fromOtherHost; Path=/")]
        server.serve("/away", data: Data(), options: away)
        let delegate = RecordingDelegate()
        let session = groupSession("cookies-redirect", delegate: delegate)
        defer { session.invalidateAndCancel() }
        _ = download("/hop", in: session, delegate: delegate)
        #expect(cookieSent(to: "/hop") == nil)
        #expect(cookieSent(to: "/landing") == "hop=from302", "sent to the redirect target: \(server.requests.map { "\($0.path) \($0.headers["Cookie"] ?? "-")" })")
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == "hop=from302", "kept in the store")

        _ = download("/away", in: session, delegate: delegate)
        let landing = server.requests.last { $0.path == "/landing" }
        #expect(landing?.header("Host")?.hasPrefix("localhost") == true)
        #expect(landing?.header("Cookie") == nil, "127.0.0.1's cookies do not go to localhost: \(landing?.header("Cookie") ?? "-")")
    }

    @Test("A cookie the server deletes (Max-Age=0, or an expiry in the past) is removed from the store and no longer sent",
          arguments: ["Max-Age=0", "Expires=Thu, 01 Jan 1970 00:00:00 GMT"])
    func cookieDeletedByServer(_ deletion: String) throws {
        serveCookieRoutes()
        var logout = RouteOptions()
        logout.extraHeaders = [("Set-Cookie", "token=gone; Path=/; \(deletion)")]
        server.serve("/logout", data: Data("bye".utf8), options: logout)
        let delegate = RecordingDelegate()
        let session = groupSession("cookies-deleted", delegate: delegate)
        defer { session.invalidateAndCancel() }
        _ = download("/login", in: session, delegate: delegate)
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == "token=abc123")
        _ = download("/logout", in: session, delegate: delegate)
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == nil, "deleted: \(cookieSent(to: "/next") ?? "-")")
        let stored = (try? String(contentsOf: groupJar, encoding: .utf8)) ?? ""
        #expect(!stored.contains("token"), "removed from the store: \(stored)")
    }

    @Test("httpShouldSetCookies = false: a stored cookie is not sent")
    func shouldSetCookiesFalse() throws {
        serveCookieRoutes()
        let delegate = RecordingDelegate()
        let session = groupSession("cookies-off", delegate: delegate) { $0.httpShouldSetCookies = false }
        _ = download("/login", in: session, delegate: delegate)
        _ = download("/next", in: session, delegate: delegate)
        #expect(server.requests.count == 2)
        #expect(cookieSent(to: "/next") == nil, "\(server.requests.map(\.headers))")
        session.invalidateAndCancel()
    }

    @Test("httpCookieAcceptPolicy = .never: a cookie the server sets is not stored, nor sent later")
    func acceptPolicyNever() throws {
        serveCookieRoutes()
        let delegate = RecordingDelegate()
        let session = groupSession("cookies-never", delegate: delegate) { $0.httpCookieAcceptPolicy = .never }
        _ = download("/login", in: session, delegate: delegate)
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == nil)
        #expect(!FileManager.default.fileExists(atPath: groupJar.path), "nothing stored")
        session.invalidateAndCancel()
    }

    @Test("A corrupt cookie store does not stop transfers: it is taken as empty and replaced by the next cookie set")
    func corruptStore() throws {
        serveCookieRoutes()
        try FileManager.default.createDirectory(at: groupJar.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("{ not json at all".utf8).write(to: groupJar)
        let delegate = RecordingDelegate()
        let session = groupSession("cookies-corrupt", delegate: delegate)
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == nil)
        _ = download("/login", in: session, delegate: delegate)
        _ = download("/next", in: session, delegate: delegate)
        #expect(cookieSent(to: "/next") == "token=abc123", "the store works again once replaced")
        session.invalidateAndCancel()
    }
}
}
