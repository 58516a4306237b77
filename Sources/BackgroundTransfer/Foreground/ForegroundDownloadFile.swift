import Foundation
import FoundationNetworking

/// A default session's data task whose delegate answered `.becomeDownload`: the download task
/// that takes its place and the file its body goes to. FoundationNetworking cannot turn a
/// data task into a download (it traps), so the bridge lets it go on as a data task and
/// writes what arrives here. Used on the bridge's callback queue only (FoundationNetworking's
/// serial delegate queue), so it needs no lock.
final class ForegroundDownloadFile: @unchecked Sendable {
    /// The download task the app is handed in `didBecome downloadTask`: same identifier and
    /// request, its state and response still FoundationNetworking's task's.
    let task: URLSessionDownloadTask
    /// Where the body is written: the app's `tmp/`, named as Apple's downloads are.
    let location: URL
    /// The response's `Content-Length`, or -1.
    let expected: Int64
    private(set) var written: Int64 = 0
    /// The task's `didFinishCollecting` call, held until `didFinishDownloadingTo` was made.
    var metrics: (@Sendable (URLSession) -> Void)?
    private let handle: FileHandle

    /// Fails with -3000 (cannot create file), naming the path, when the file cannot be made.
    init(replacing dataTask: URLSessionDataTask, expected: Int64) throws(URLError) {
        var record = dataTask.record
        record.kind = .download
        task = URLSessionDownloadTask(record: record, backend: dataTask.backend)
        task.foundationTask = dataTask.foundationTask
        self.expected = expected
        location = BackgroundApplication.shared.temporaryDirectory.appendingPathComponent("CFNetworkDownload_\(UUID().uuidString).tmp")
        do {
            try FileManager.default.createDirectory(at: location.deletingLastPathComponent(), withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: location.path, contents: nil, attributes: [.posixPermissions: 0o600]) else { throw CocoaError(.fileWriteUnknown) }
            handle = try FileHandle(forWritingTo: location)
        } catch {
            throw URLError(.cannotCreateFile, userInfo: [NSLocalizedDescriptionKey: "cannot create \(location.path) for the download: \(error)", NSURLErrorFailingURLErrorKey: dataTask.originalRequest?.url as Any])
        }
    }

    /// Appends `data`; fails with -3003 (cannot write to file), naming the path.
    func write(_ data: Data) throws(URLError) {
        do {
            try handle.write(contentsOf: data)
            written += Int64(data.count)
        } catch {
            throw URLError(.cannotWriteToFile, userInfo: [NSLocalizedDescriptionKey: "cannot write to \(location.path): \(error)", NSURLErrorFailingURLErrorKey: task.originalRequest?.url as Any])
        }
    }

    /// Closes the file (it stays until the app has had it in `didFinishDownloadingTo`).
    func close() {
        try? handle.close()
    }

    /// Removes the file: after `didFinishDownloadingTo`, or when the task failed.
    func remove() {
        try? FileManager.default.removeItem(at: location)
    }
}
