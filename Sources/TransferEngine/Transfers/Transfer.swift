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
    func progress(now: Date) -> TaskProgress
    /// Stops using files; the transfer is done with.
    func close()
}
