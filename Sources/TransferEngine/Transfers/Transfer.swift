import Foundation
import TransferContainer

/// A transfer in flight as the engine drives it, download or upload: its task, its libcurl
/// handle and the progress it reports. Owned by the event loop.
protocol Transfer: AnyObject {
    var session: SessionKey { get }
    /// The task as this transfer knows it now (counts, response, validator, upload location).
    var task: TaskRecord { get }
    var easy: CurlEasy { get }
    /// When progress was last pushed, and at how many bytes; owned by the engine.
    var lastProgressReport: Date { get set }
    var lastReportedBytes: Int64 { get set }
    /// Bytes received (download) or sent (upload) so far.
    var bytesMoved: Int64 { get }
    /// What to push to an attached client now (S7.3).
    var progress: TaskProgress { get }
    /// Stops using files; the transfer is done with.
    func close()
}

extension CurlEasy {
    /// What every exchange of a task sends and obeys: the session's `httpAdditionalHeaders`,
    /// then the request's own headers (less those `excluded` names, lowercased), then
    /// `extraHeaders`; redirects followed (up to 16); and the idle timeout, the request's
    /// `timeoutInterval` or else the session's `timeoutIntervalForRequest` (S6.4), with
    /// connecting capped at 60 s.
    func apply(_ request: RequestRecord, in configuration: SessionConfiguration, excluding excluded: Set<String> = [], extraHeaders: [String] = []) throws(CurlError) {
        var headers = (configuration.httpAdditionalHeaders ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        headers += request.headers.filter { !excluded.contains($0.name.lowercased()) }.map { "\($0.name): \($0.value)" }
        try setHeaders(headers + extraHeaders)
        setFollowsRedirects(true, maximum: 16)
        let idle = request.timeoutInterval ?? configuration.timeoutIntervalForRequest
        setTimeouts(connect: min(idle, 60), lowSpeedLimit: 1, lowSpeedTime: idle)
    }
}
