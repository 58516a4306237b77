import Foundation
import FoundationNetworking
import Testing
import BackgroundTransfer
import LoopbackServer

/// A configuration's cookie storage, credential storage, cache and protocol classes are
/// FoundationNetworking's, made when first read (FoundationStores.swift): the values match
/// FoundationNetworking's `.default` and `.ephemeral` configurations, what the app sets wins
/// (nil too), copies share them; and a process that only uses a background session never
/// makes FoundationNetworking's shared stores, which read and write in the user's home.
@Suite(.timeLimit(.minutes(20)))
struct ConfigurationStoresTests {
    @Test("Defaults equal FoundationNetworking's: .default and background configurations its shared stores and policies, .ephemeral stores of its own, kept from one read to the next")
    func defaultsMatchFoundationNetworking() {
        let foundation = FoundationNetworking.URLSessionConfiguration.default
        for ours in [BackgroundTransfer.URLSessionConfiguration.default, .background(withIdentifier: "stores")] {
            #expect(ours.httpCookieStorage === foundation.httpCookieStorage)
            #expect(ours.urlCredentialStorage === foundation.urlCredentialStorage)
            #expect(ours.urlCache === foundation.urlCache)
            #expect(ours.httpShouldSetCookies == foundation.httpShouldSetCookies)
            #expect(ours.httpCookieAcceptPolicy == foundation.httpCookieAcceptPolicy)
            #expect(ours.requestCachePolicy == foundation.requestCachePolicy)
            #expect(ours.protocolClasses?.map { "\($0)" } == foundation.protocolClasses?.map { "\($0)" })
        }
        let ephemeral = BackgroundTransfer.URLSessionConfiguration.ephemeral
        let theirs = FoundationNetworking.URLSessionConfiguration.ephemeral
        #expect(ephemeral.httpShouldSetCookies == theirs.httpShouldSetCookies)
        #expect(ephemeral.httpCookieAcceptPolicy == theirs.httpCookieAcceptPolicy)
        #expect(ephemeral.requestCachePolicy == theirs.requestCachePolicy)
        let cookies = ephemeral.httpCookieStorage
        #expect(cookies != nil && cookies !== HTTPCookieStorage.shared, "an ephemeral configuration keeps cookies in memory")
        #expect(ephemeral.httpCookieStorage === cookies, "the same storage at every read")
        #expect(ephemeral.urlCache !== URLCache.shared)
        #expect(BackgroundTransfer.URLSessionConfiguration.ephemeral.httpCookieStorage !== cookies, "each ephemeral configuration its own")
    }

    @Test("What the app sets wins, nil included, and a session's copy keeps it; an ephemeral session's copy shares its stores")
    func settingsWinAndAreCopied() {
        let configuration = BackgroundTransfer.URLSessionConfiguration.default
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.protocolClasses = []
        let own = URLCredentialStorage()
        configuration.urlCredentialStorage = own
        #expect(configuration.httpCookieStorage == nil)
        #expect(configuration.urlCache == nil)
        #expect(configuration.protocolClasses?.isEmpty == true)
        #expect(configuration.urlCredentialStorage === own)
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        #expect(session.configuration.httpCookieStorage == nil)
        #expect(session.configuration.urlCache == nil)
        #expect(session.configuration.protocolClasses?.isEmpty == true)
        #expect(session.configuration.urlCredentialStorage === own)
        #expect(session.configuration.httpShouldSetCookies)

        let ephemeral = BackgroundTransfer.URLSessionConfiguration.ephemeral
        let ephemeralSession = URLSession(configuration: ephemeral)
        defer { ephemeralSession.invalidateAndCancel() }
        #expect(ephemeralSession.configuration.httpCookieStorage === ephemeral.httpCookieStorage)
        #expect(ephemeralSession.configuration.urlCache === ephemeral.urlCache)
    }

    @Test("An extension that opens its background session and starts a download makes none of FoundationNetworking's shared stores: nothing appears in its home (no ~/.cache, no ~/.local/share)")
    func backgroundProcessLeavesHomeAlone() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/home.bin", data: testPayload(size: 1000, seed: 96))
        _ = try DaemonUnderTest.start(container)
        let home = container.parent.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let running = try Executable.fetchExtension.start(["download", server.url(for: "/home.bin").absoluteString], in: container,
                                                          environment: ["HOME": home.path, "XDG_CACHE_HOME": "", "XDG_DATA_HOME": ""])
        let outcome = running.wait(timeout: 60)
        #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
        #expect(outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the task was created")
        let left = (try? FileManager.default.subpathsOfDirectory(atPath: home.path)) ?? []
        #expect(left.isEmpty, "the extension left \(left) in its home")
    }
}
