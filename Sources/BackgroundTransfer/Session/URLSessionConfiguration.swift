import Foundation
import FoundationNetworking
import TransferContainer

/// A session's configuration, with Apple's names and defaults (S5 table): a background
/// configuration (with an identifier) or the default one.
/// Copied when a session is created, as Apple does. Thread-safe for reading once handed over.
open class URLSessionConfiguration: @unchecked Sendable {
    /// The background session identifier (S1.1).
    public private(set) var identifier: String?
    /// The app group whose container the session's files live in (S1.5, S3.3). An extension's
    /// background session needs one (else -995); the app must be entitled to the group.
    public var sharedContainerIdentifier: String?
    /// Whether the containing app is launched when the session's tasks end or one needs an
    /// answer (S3.1). Default true.
    public var sessionSendsLaunchEvents = true
    /// Discretionary work waits for good conditions (an unmetered network and power, per
    /// `bgtransfer conditions`). Tasks an app creates while in the background are always
    /// discretionary. Default false.
    public var isDiscretionary = false
    /// When false, tasks wait while only a cellular network is available (S5). Default true.
    public var allowsCellularAccess = true
    /// When false, tasks wait while only an expensive network is available. Default true.
    public var allowsExpensiveNetworkAccess = true
    /// When false, tasks wait while only a constrained (low data) network is available.
    /// Default true.
    public var allowsConstrainedNetworkAccess = true
    /// Ignored: background sessions always wait for connectivity (S5.3).
    public var waitsForConnectivity = false
    /// How long a request may go without receiving data (an idle timeout), in seconds. In a
    /// background session a request that times out is retried, not failed (S6.4). Default 60.
    public var timeoutIntervalForRequest: TimeInterval = 60
    /// The whole budget of a task, retries included, in seconds; once spent the task fails
    /// with -1001 (and resume data where resumable). Default 7 days.
    public var timeoutIntervalForResource: TimeInterval = 7 * 24 * 3600
    /// Connections the session opens to one host at a time (HTTP/2 streams share one).
    /// Default 6.
    public var httpMaximumConnectionsPerHost = 6
    /// Header fields sent with every request of the session, unless the request sets them.
    public var httpAdditionalHeaders: [String: String]?
    /// Ours, not Apple's (S7.4): download tasks of this session with the same GET (URL and
    /// headers) are fetched once; each task still gets its own identifier, file and callbacks.
    public var coalescesIdenticalDownloads = false
    /// Apple's proxy settings, with CFNetwork's key names (the values of
    /// `kCFNetworkProxiesHTTPEnable` and the rest): an HTTP proxy for http URLs as
    /// `"HTTPEnable": 1` (optional), `"HTTPProxy": host`, `"HTTPPort": port` (8080 when
    /// missing), and an HTTPS proxy for https URLs, reached with `CONNECT`, as
    /// `"HTTPSEnable"`, `"HTTPSProxy"`, `"HTTPSPort"` (443 when missing).
    public var connectionProxyDictionary: [AnyHashable: Any]?
    /// Kept and ignored: a background session's connections are the daemon's, which keeps
    /// nothing open on an app's behalf after its tasks end.
    public var shouldUseExtendedBackgroundIdleMode = false

    // What FoundationNetworking's configuration offers, for default sessions' data and upload
    // tasks (ForegroundConfiguration.swift); its defaults, `.ephemeral`'s private stores for
    // ephemeral sessions. Background sessions' transfers use the cookie settings (S9.4,
    // URLSessionConfiguration+Cookies.swift), not the rest.
    /// Where cookies are kept and read from. Default: FoundationNetworking's shared storage
    /// (`.ephemeral`: one in memory).
    public var httpCookieStorage: HTTPCookieStorage? {
        get { stores.httpCookieStorage ?? foundationStores.configuration.httpCookieStorage }
        set { stores.httpCookieStorage = .some(newValue) }
    }
    /// Whether stored cookies are sent with requests. Default true.
    public var httpShouldSetCookies = true
    /// Which cookies from responses are kept. Default `.onlyFromMainDocumentDomain`.
    public var httpCookieAcceptPolicy: HTTPCookie.AcceptPolicy = .onlyFromMainDocumentDomain
    /// Where credentials with `.forSession` and `.permanent` persistence are kept and looked up.
    public var urlCredentialStorage: URLCredentialStorage? {
        get { stores.urlCredentialStorage ?? foundationStores.configuration.urlCredentialStorage }
        set { stores.urlCredentialStorage = .some(newValue) }
    }
    /// The response cache (default sessions' data and upload tasks).
    public var urlCache: URLCache? {
        get { stores.urlCache ?? foundationStores.configuration.urlCache }
        set { stores.urlCache = .some(newValue) }
    }
    /// How requests use `urlCache`, unless a request sets its own policy. Default `.useProtocolCachePolicy`.
    public var requestCachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy
    /// Custom `URLProtocol` subclasses asked first (how tests stub networking); default
    /// sessions' data and upload tasks only.
    public var protocolClasses: [AnyClass]? {
        get { stores.protocolClasses ?? foundationStores.configuration.protocolClasses }
        set { stores.protocolClasses = .some(newValue) }
    }
    /// What the app set of the four above; the rest is `foundationStores`'.
    private var stores = StoreSettings()
    /// FoundationNetworking's stores, made when first read (FoundationStores.swift).
    private let foundationStores: FoundationStores
    /// Made by `.ephemeral`: FoundationNetworking's ephemeral configuration underneath.
    let isEphemeral: Bool

    private init(identifier: String?, ephemeral: Bool = false, foundationStores: FoundationStores? = nil) {
        self.identifier = identifier
        self.isEphemeral = ephemeral
        self.foundationStores = foundationStores ?? FoundationStores(ephemeral: ephemeral)
    }

    /// Whether the cookie storage is still the one `.default` starts with, FoundationNetworking's
    /// shared storage (known without making it).
    var usesSharedCookieStorage: Bool {
        guard let set = stores.httpCookieStorage else { return !isEphemeral }
        return set === HTTPCookieStorage.shared
    }

    /// A default session's configuration: transfers run inside this process, while it runs
    /// (for work done in the foreground; hand them to a background session with resume data).
    open class var `default`: URLSessionConfiguration {
        URLSessionConfiguration(identifier: nil)
    }

    /// Like `default`, with cookies, credentials and cache kept in memory only.
    open class var ephemeral: URLSessionConfiguration {
        URLSessionConfiguration(identifier: nil, ephemeral: true)
    }

    /// A configuration for a background session with this identifier.
    open class func background(withIdentifier identifier: String) -> URLSessionConfiguration {
        URLSessionConfiguration(identifier: identifier)
    }

    func copy() -> URLSessionConfiguration {
        let copy = URLSessionConfiguration(identifier: identifier, ephemeral: isEphemeral, foundationStores: foundationStores)
        copy.sharedContainerIdentifier = sharedContainerIdentifier
        copy.sessionSendsLaunchEvents = sessionSendsLaunchEvents
        copy.isDiscretionary = isDiscretionary
        copy.allowsCellularAccess = allowsCellularAccess
        copy.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
        copy.allowsConstrainedNetworkAccess = allowsConstrainedNetworkAccess
        copy.waitsForConnectivity = waitsForConnectivity
        copy.timeoutIntervalForRequest = timeoutIntervalForRequest
        copy.timeoutIntervalForResource = timeoutIntervalForResource
        copy.httpMaximumConnectionsPerHost = httpMaximumConnectionsPerHost
        copy.httpAdditionalHeaders = httpAdditionalHeaders
        copy.coalescesIdenticalDownloads = coalescesIdenticalDownloads
        copy.connectionProxyDictionary = connectionProxyDictionary
        copy.shouldUseExtendedBackgroundIdleMode = shouldUseExtendedBackgroundIdleMode
        copy.stores = stores
        copy.httpShouldSetCookies = httpShouldSetCookies
        copy.httpCookieAcceptPolicy = httpCookieAcceptPolicy
        copy.requestCachePolicy = requestCachePolicy
        return copy
    }

    /// The daemon's form, with identifiers checked.
    func record() throws(IdentifierError) -> SessionConfiguration {
        var record = SessionConfiguration()
        if let group = sharedContainerIdentifier {
            do { record.sharedContainerIdentifier = try BundleIdentifier(group) } catch {
                throw IdentifierError(group, kind: "app group identifier", reason: error.reason)
            }
        }
        record.sessionSendsLaunchEvents = sessionSendsLaunchEvents
        record.isDiscretionary = isDiscretionary
        record.allowsCellularAccess = allowsCellularAccess
        record.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
        record.allowsConstrainedNetworkAccess = allowsConstrainedNetworkAccess
        record.timeoutIntervalForRequest = timeoutIntervalForRequest
        record.timeoutIntervalForResource = timeoutIntervalForResource
        record.httpMaximumConnectionsPerHost = httpMaximumConnectionsPerHost
        record.httpAdditionalHeaders = httpAdditionalHeaders
        record.coalescesIdenticalDownloads = coalescesIdenticalDownloads
        record.httpProxy = proxy(prefix: "HTTP", defaultPort: 8080)
        record.httpsProxy = proxy(prefix: "HTTPS", defaultPort: 443)
        record.cookies = identifier == nil ? nil : cookieSettings(appGroups: (AppEnvironment.isBootstrapped ? AppEnvironment.identity.appGroups : []) + [record.sharedContainerIdentifier].compactMap { $0 })
        return record.checked
    }

    /// "host:port" of the proxy `connectionProxyDictionary` names with keys `<prefix>Enable`,
    /// `<prefix>Proxy` and `<prefix>Port` ("HTTP" or "HTTPS"), if it names one.
    private func proxy(prefix: String, defaultPort: Int) -> String? {
        guard let settings = connectionProxyDictionary else { return nil }
        if let enabled = settings[prefix + "Enable"], (enabled as? Int) == 0 || (enabled as? Bool) == false { return nil }
        guard let host = settings[prefix + "Proxy"] as? String, !host.isEmpty else { return nil }
        let port = (settings[prefix + "Port"] as? Int) ?? Int(settings[prefix + "Port"] as? String ?? "") ?? defaultPort
        return "\(host):\(port)"
    }
}
