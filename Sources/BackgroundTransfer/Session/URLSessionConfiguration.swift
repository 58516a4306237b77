import Foundation
import FoundationNetworking
import TransferContainer

/// A session's configuration, with Apple's names and defaults (S5 table): a background
/// configuration (with an identifier) or the default one.
/// Copied when a session is created, as Apple does. Thread-safe for reading once handed over.
open class URLSessionConfiguration: @unchecked Sendable {
    /// The background session identifier (S1.1).
    public private(set) var identifier: String?
    public var sharedContainerIdentifier: String?
    public var sessionSendsLaunchEvents = true
    public var isDiscretionary = false
    public var allowsCellularAccess = true
    public var allowsExpensiveNetworkAccess = true
    public var allowsConstrainedNetworkAccess = true
    /// Ignored: background sessions always wait for connectivity (S5.3).
    public var waitsForConnectivity = false
    public var timeoutIntervalForRequest: TimeInterval = 60
    public var timeoutIntervalForResource: TimeInterval = 7 * 24 * 3600
    public var httpMaximumConnectionsPerHost = 6
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
    // ephemeral sessions. Background sessions do not use them yet.
    public var httpCookieStorage: HTTPCookieStorage?
    public var httpShouldSetCookies: Bool
    public var httpCookieAcceptPolicy: HTTPCookie.AcceptPolicy
    public var urlCredentialStorage: URLCredentialStorage?
    public var urlCache: URLCache?
    public var requestCachePolicy: URLRequest.CachePolicy
    /// Custom `URLProtocol` subclasses asked first (how tests stub networking); default
    /// sessions' data and upload tasks only.
    public var protocolClasses: [AnyClass]?
    /// Made by `.ephemeral`: FoundationNetworking's ephemeral configuration underneath.
    let isEphemeral: Bool

    private init(identifier: String?, ephemeral: Bool = false) {
        self.identifier = identifier
        self.isEphemeral = ephemeral
        let base: FoundationNetworking.URLSessionConfiguration = ephemeral ? .ephemeral : .default
        httpCookieStorage = base.httpCookieStorage
        httpShouldSetCookies = base.httpShouldSetCookies
        httpCookieAcceptPolicy = base.httpCookieAcceptPolicy
        urlCredentialStorage = base.urlCredentialStorage
        urlCache = base.urlCache
        requestCachePolicy = base.requestCachePolicy
        protocolClasses = base.protocolClasses
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
        let copy = URLSessionConfiguration(identifier: identifier, ephemeral: isEphemeral)
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
        copy.httpCookieStorage = httpCookieStorage
        copy.httpShouldSetCookies = httpShouldSetCookies
        copy.httpCookieAcceptPolicy = httpCookieAcceptPolicy
        copy.urlCredentialStorage = urlCredentialStorage
        copy.urlCache = urlCache
        copy.requestCachePolicy = requestCachePolicy
        copy.protocolClasses = protocolClasses
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
