import Foundation
import FoundationNetworking

extension URLSessionConfiguration {
    /// FoundationNetworking's configuration for a default session's data and upload tasks
    /// (`ForegroundSession`): every setting with a counterpart there, and this library's
    /// `User-Agent` unless the app sets one (the one download tasks send too).
    func foundationConfiguration() -> FoundationNetworking.URLSessionConfiguration {
        let made: FoundationNetworking.URLSessionConfiguration = isEphemeral ? .ephemeral : .default
        made.timeoutIntervalForRequest = timeoutIntervalForRequest
        made.timeoutIntervalForResource = timeoutIntervalForResource
        made.httpMaximumConnectionsPerHost = httpMaximumConnectionsPerHost
        made.allowsCellularAccess = allowsCellularAccess
        made.connectionProxyDictionary = connectionProxyDictionary
        var headers: [AnyHashable: Any] = httpAdditionalHeaders ?? [:]
        if !headers.keys.contains(where: { ($0 as? String)?.caseInsensitiveCompare("User-Agent") == .orderedSame }) {
            headers["User-Agent"] = URLSession.defaultUserAgent
        }
        made.httpAdditionalHeaders = headers
        made.httpCookieStorage = httpCookieStorage
        made.httpShouldSetCookies = httpShouldSetCookies
        made.httpCookieAcceptPolicy = httpCookieAcceptPolicy
        made.urlCredentialStorage = urlCredentialStorage
        made.urlCache = urlCache
        made.requestCachePolicy = requestCachePolicy
        made.protocolClasses = protocolClasses
        return made
    }
}
