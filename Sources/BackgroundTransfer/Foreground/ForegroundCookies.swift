import Foundation
import FoundationNetworking
import TransferContainer
import TransferTransport

/// Keeps the cookie storage FoundationNetworking uses for a session's in-process tasks
/// (default sessions' data and upload tasks, background sessions' data tasks) in step with
/// the container's cookie store the daemon uses for the same storage (S9.4): the store's
/// cookies for a URL go into the storage before a task for it is made, and the storage's
/// cookies for the URL a task ended at go into the store afterwards. So a cookie one process
/// of an app group (or the daemon) keeps in the group's store is sent by the others. Only for
/// an app group's storage: `HTTPCookieStorage.shared` stays FoundationNetworking's own, so
/// that a cookie the app deletes from it is not brought back from a store (corelibs' storage
/// cannot be subclassed to hear of deletions). Made once per FoundationNetworking session;
/// safe from any thread (corelibs' storage is).
struct ForegroundCookies: @unchecked Sendable {
    let jar: CookieJar
    let storage: HTTPCookieStorage
    let settings: CookieSettings

    /// Nil for a session whose storage is not an app group's.
    init?(configuration: URLSessionConfiguration) {
        guard AppEnvironment.isBootstrapped, let storage = configuration.httpCookieStorage, storage !== HTTPCookieStorage.shared else { return nil }
        let identity = AppEnvironment.identity
        guard let settings = configuration.cookieSettings(appGroups: identity.appGroups), settings.appGroup != nil else { return nil }
        let log = AppEnvironment.log
        self.jar = CookieJar(path: AppEnvironment.layout.cookieJar(settings, owner: identity.bundleIdentifier).path) { problem in log.error("cookies", problem) }
        self.storage = storage
        self.settings = settings
    }

    /// Before a task for `url`: the store's cookies for it, into the storage.
    func load(for url: URL?) {
        guard settings.sendsCookies, let url else { return }
        for cookie in jar.cookies(for: url) { storage.setCookie(cookie) }
    }

    /// After a task that ended at `url`: the storage's cookies for it, into the store.
    func save(from url: URL?) {
        guard settings.storesCookies, let url, let cookies = storage.cookies(for: url), !cookies.isEmpty else { return }
        jar.store(cookies, from: url)
    }
}
