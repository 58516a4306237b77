import Foundation

/// The configuration a background session was opened with, as the daemon keeps it (S1.8:
/// a reopened session goes on with the configuration its tasks started with).
public struct SessionConfiguration: Codable, Sendable, Equatable {
    public var sharedContainerIdentifier: BundleIdentifier?
    public var sessionSendsLaunchEvents: Bool = true
    public var isDiscretionary: Bool = false
    public var allowsCellularAccess: Bool = true
    public var allowsExpensiveNetworkAccess: Bool = true
    public var allowsConstrainedNetworkAccess: Bool = true
    public var timeoutIntervalForRequest: Double = 60
    public var timeoutIntervalForResource: Double = 7 * 24 * 3600
    public var httpMaximumConnectionsPerHost: Int = 6
    public var httpAdditionalHeaders: [String: String]?
    /// Ours (S7.4, a MAY): download tasks of the session with the same GET are fetched once.
    public var coalescesIdenticalDownloads: Bool = false
    /// The HTTP proxy ("host:port") from `connectionProxyDictionary`, for http URLs; nil: none.
    public var httpProxy: String?
    /// The HTTPS proxy ("host:port") from `connectionProxyDictionary`, for https URLs, which
    /// go through it in a `CONNECT` tunnel; nil: none. Missing from older records.
    public var httpsProxy: String?
    /// Cookies (S9.4): the store, `httpShouldSetCookies`, `httpCookieAcceptPolicy`; nil: none.
    public var cookies: CookieSettings?

    public init() {}

    /// Keys missing from an older record take their defaults.
    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = SessionConfiguration()
        sharedContainerIdentifier = try values.decodeIfPresent(BundleIdentifier.self, forKey: .sharedContainerIdentifier)
        sessionSendsLaunchEvents = try values.decodeIfPresent(Bool.self, forKey: .sessionSendsLaunchEvents) ?? defaults.sessionSendsLaunchEvents
        isDiscretionary = try values.decodeIfPresent(Bool.self, forKey: .isDiscretionary) ?? defaults.isDiscretionary
        allowsCellularAccess = try values.decodeIfPresent(Bool.self, forKey: .allowsCellularAccess) ?? defaults.allowsCellularAccess
        allowsExpensiveNetworkAccess = try values.decodeIfPresent(Bool.self, forKey: .allowsExpensiveNetworkAccess) ?? defaults.allowsExpensiveNetworkAccess
        allowsConstrainedNetworkAccess = try values.decodeIfPresent(Bool.self, forKey: .allowsConstrainedNetworkAccess) ?? defaults.allowsConstrainedNetworkAccess
        timeoutIntervalForRequest = try values.decodeIfPresent(Double.self, forKey: .timeoutIntervalForRequest) ?? defaults.timeoutIntervalForRequest
        timeoutIntervalForResource = try values.decodeIfPresent(Double.self, forKey: .timeoutIntervalForResource) ?? defaults.timeoutIntervalForResource
        httpMaximumConnectionsPerHost = try values.decodeIfPresent(Int.self, forKey: .httpMaximumConnectionsPerHost) ?? defaults.httpMaximumConnectionsPerHost
        httpAdditionalHeaders = try values.decodeIfPresent([String: String].self, forKey: .httpAdditionalHeaders)
        coalescesIdenticalDownloads = try values.decodeIfPresent(Bool.self, forKey: .coalescesIdenticalDownloads) ?? defaults.coalescesIdenticalDownloads
        httpProxy = try values.decodeIfPresent(String.self, forKey: .httpProxy)
        httpsProxy = try values.decodeIfPresent(String.self, forKey: .httpsProxy)
        cookies = try values.decodeIfPresent(CookieSettings.self, forKey: .cookies)
        self = checked
    }

    /// The proxy ("host:port") a request to `url` goes through, as Apple's settings say:
    /// the HTTPS proxy for https URLs (a `CONNECT` tunnel), the HTTP proxy for the rest.
    public func proxy(for url: String) -> String? {
        url.prefix(8).lowercased() == "https://" ? httpsProxy : httpProxy
    }

    /// This configuration with its numbers in range (`CheckedNumbers`): what an app sets and
    /// what a record says may be anything, and the daemon computes deadlines with them.
    public var checked: SessionConfiguration {
        var copy = self
        let defaults = SessionConfiguration()
        copy.timeoutIntervalForRequest = CheckedNumbers.timeout(timeoutIntervalForRequest, fallback: defaults.timeoutIntervalForRequest)
        copy.timeoutIntervalForResource = CheckedNumbers.timeout(timeoutIntervalForResource, fallback: defaults.timeoutIntervalForResource)
        if httpMaximumConnectionsPerHost < 1 { copy.httpMaximumConnectionsPerHost = defaults.httpMaximumConnectionsPerHost }
        return copy
    }
}

/// `Sessions/<family>/<identifier>/session.json`: one background session as the daemon
/// knows it. Written by the daemon only.
public struct SessionRecord: Codable, Sendable, Equatable {
    public static let currentVersion = 1

    public var version: Int = SessionRecord.currentVersion
    public var identifier: SessionIdentifier
    /// The bundle that created the session (an app or one of its extensions).
    public var owner: BundleIdentifier
    /// The containing app: the namespace the identifier is unique in.
    public var family: BundleIdentifier
    public var configuration: SessionConfiguration
    public var createdAt: Date
    /// Lower bounds for the next numbers handed out, kept so that numbers are never reused
    /// after the records that used them were deleted (S7.1).
    public var nextTaskIdentifier: Int = 1
    public var nextEventNumber: UInt64 = 1
    /// Server keys the session's app accepted (S3.6), oldest first; nil in older records.
    public var acceptedServerKeys: [AcceptedServerKey]?
    /// True when the last process that opened the session had no delegate: the events it
    /// took were acknowledged without reaching one (S1.2). Nil once one opens it with a delegate.
    public var openedWithoutDelegate: Bool?

    public init(identifier: SessionIdentifier, owner: BundleIdentifier, family: BundleIdentifier, configuration: SessionConfiguration, createdAt: Date) {
        self.identifier = identifier
        self.owner = owner
        self.family = family
        self.configuration = configuration
        self.createdAt = createdAt
    }
}
