import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// A `URLRequest` as the daemon keeps it, and the `User-Agent` sent when the app sets none.
/// Pure values; any thread.
extension URLSession {
    /// The request as the daemon keeps it: its method, headers (with a `User-Agent` naming
    /// the app and the library unless the request or the configuration sets one, as Apple's
    /// does) and timeout (URLRequest's default of 60 s, and values that are not finite,
    /// defer to the configuration's `timeoutIntervalForRequest`).
    func record(of request: URLRequest) -> RequestRecord {
        Self.record(of: request, configuration: configuration, userAgent: userAgent)
    }

    /// `userAgent`: the session's, made once (`defaultUserAgent` reads the app's environment).
    static func record(of request: URLRequest, configuration: URLSessionConfiguration, userAgent: @autoclosure () -> String = defaultUserAgent) -> RequestRecord {
        var fields = request.allHTTPHeaderFields ?? [:]
        let hasAgent = fields.keys.contains { $0.caseInsensitiveCompare("User-Agent") == .orderedSame }
            || (configuration.httpAdditionalHeaders ?? [:]).keys.contains { $0.caseInsensitiveCompare("User-Agent") == .orderedSame }
        if !hasAgent { fields["User-Agent"] = userAgent() }
        let headers = fields.sorted { $0.key < $1.key }.map { HeaderField(name: $0.key, value: $0.value) }
        // Infinity and NaN cannot travel as JSON numbers: such a request has the configuration's
        // timeout (the daemon holds finite values of any size to a range).
        let timeout: Double? = request.timeoutInterval == defaultRequestTimeout || !request.timeoutInterval.isFinite ? nil : request.timeoutInterval
        return RequestRecord(url: request.url?.absoluteString ?? "", httpMethod: request.httpMethod ?? "GET", headers: headers, timeoutInterval: timeout)
    }

    /// `URLRequest`'s own default `timeoutInterval`.
    static let defaultRequestTimeout: TimeInterval = 60

    /// The library's version, as it appears in the `User-Agent` (the project's one version, `ProductVersion`).
    public static let libraryVersion = ProductVersion.current

    /// What every request sends as its `User-Agent` unless the app sets one: the app's
    /// executable and bundle, the library, the system, e.g.
    /// `reader-app (com.example.reader) BackgroundTransfer/1.0 Linux/6.8.0` (Apple's reads
    /// `Reader/1 CFNetwork/1490.0.4 Darwin/23.2.0`).
    public static var defaultUserAgent: String {
        let app: String
        if AppEnvironment.isBootstrapped {
            app = "\(AppEnvironment.log.process) (\(AppEnvironment.identity.bundleIdentifier))"
        } else {
            app = (ProcessSpawner.currentExecutable as NSString).lastPathComponent
        }
        return "\(app) BackgroundTransfer/\(libraryVersion) Linux/\(kernelRelease)"
    }

    /// `uname -r`, read once.
    private static let kernelRelease: String = {
        var system = utsname()
        uname(&system)
        return withUnsafeBytes(of: &system.release) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
    }()
}
