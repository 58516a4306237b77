import Foundation

/// What a background session does with cookies (S9.4), as its configuration record carries
/// it: which cookie store (a `CookieJar` file) the daemon reads and writes, whether it sends
/// stored cookies (`httpShouldSetCookies`) and which it keeps (`httpCookieAcceptPolicy`).
/// Absent from a record: the session has no cookie storage (`httpCookieStorage = nil`), as
/// in records from before cookies.
public struct CookieSettings: Codable, Sendable, Equatable {
    /// Apple's `HTTPCookie.AcceptPolicy`, by name.
    public enum AcceptPolicy: String, Codable, Sendable {
        case always
        case never
        /// No task of a background session has a main document: taken as `always`.
        case onlyFromMainDocumentDomain
    }

    /// The app group whose store is used (`HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier:)`),
    /// shared by every process of the group; the owner must be entitled to it. nil: the
    /// owner's own store (Apple's `HTTPCookieStorage.shared`), in its private container.
    public var appGroup: BundleIdentifier?
    public var sendsCookies: Bool
    public var acceptPolicy: AcceptPolicy

    public init(appGroup: BundleIdentifier? = nil, sendsCookies: Bool = true, acceptPolicy: AcceptPolicy = .always) {
        self.appGroup = appGroup
        self.sendsCookies = sendsCookies
        self.acceptPolicy = acceptPolicy
    }

    /// Whether cookies a server sets are kept.
    public var storesCookies: Bool { acceptPolicy != .never }
}

extension ContainerLayout {
    /// `<app group or private container>/Library/Cookies/Cookies.json`: the cookie store of a
    /// session owned by `owner` with these settings.
    public func cookieJar(_ settings: CookieSettings, owner: BundleIdentifier) -> URL {
        let base = settings.appGroup.map(appGroup) ?? privateContainer(owner)
        return base.appendingPathComponent("Library/Cookies", isDirectory: true).appendingPathComponent("Cookies.json", isDirectory: false)
    }
}
