// Code as it is written for iOS, with `UIApplication` replaced by `BackgroundApplication` and
// `import UIKit` by `import BackgroundTransfer`, compiled in Swift 5 language mode. It only
// has to build: it shows that such code compiles unchanged. (Not run: reader-app is the
// example that runs.)
import BackgroundTransfer

final class DownloadManager: NSObject, URLSessionDownloadDelegate {
    static let shared = DownloadManager()
    var backgroundCompletionHandler: (() -> Void)?
    private var resumeData: Data?

    lazy var session: URLSession = {
        let config = URLSessionConfiguration.background(withIdentifier: "com.example.reader.background")
        config.isDiscretionary = false
        config.sessionSendsLaunchEvents = true
        config.sharedContainerIdentifier = "group.com.example.reader"
        config.shouldUseExtendedBackgroundIdleMode = true
        return URLSession(configuration: config, delegate: self, delegateQueue: nil)
    }()

    func download(_ url: URL) {
        let task: URLSessionDownloadTask
        if let resumeData = resumeData {
            task = session.downloadTask(withResumeData: resumeData)
        } else {
            task = session.downloadTask(with: url)
        }
        task.earliestBeginDate = Date().addingTimeInterval(60)
        task.countOfBytesClientExpectsToSend = 200
        task.countOfBytesClientExpectsToReceive = 500 * 1024
        task.priority = URLSessionTask.highPriority
        task.taskDescription = url.lastPathComponent
        task.resume()
    }

    func pauseAll() {
        session.getTasksWithCompletionHandler { _, _, downloads in
            for task in downloads {
                task.cancel(byProducingResumeData: { data in self.resumeData = data })
            }
        }
    }

    func fetchSmallThing(_ url: URL) {
        URLSession.shared.dataTask(with: url) { data, response, error in
            guard let data = data, (response as? HTTPURLResponse)?.statusCode == 200 else {
                print("failed: \(String(describing: error))")
                return
            }
            print("got \(data.count) bytes")
        }.resume()
    }

    func fetchAsync(_ url: URL) async throws -> Data {
        let (data, _) = try await URLSession.shared.data(from: url)
        return data
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        guard let container = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.reader") else { return }
        let destination = container.appendingPathComponent(downloadTask.taskDescription ?? "download")
        try? FileManager.default.removeItem(at: destination)
        try? FileManager.default.moveItem(at: location, to: destination)
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        let fraction = Double(totalBytesWritten) / Double(max(totalBytesExpectedToWrite, 1))
        print("\(downloadTask.taskIdentifier): \(Int(fraction * 100)) %")
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64, expectedTotalBytes: Int64) {}

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        guard let error = error as? URLError else { return }
        if let data = error.downloadTaskResumeData {
            resumeData = data
        }
        if let reason = error.backgroundTaskCancelledReason {
            switch reason {
            case .userForceQuitApplication: print("the user force-quit the app")
            case .backgroundUpdatesDisabled: print("background updates are off")
            case .insufficientSystemResources: print("the system ran short")
            @unknown default: break
            }
        }
        if error.code == .cancelled, error.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] != nil {
            print("cancelled by the system")
        }
    }

    func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask) {}

    func urlSession(_ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest, completionHandler: @escaping (URLSession.DelayedRequestDisposition, URLRequest?) -> Void) {
        completionHandler(.continueLoading, nil)
    }

    func urlSession(_ session: URLSession, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        completionHandler(.performDefaultHandling, nil)
    }

    func urlSession(_ session: URLSession, didCreateTask task: URLSessionTask) {}

    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        DispatchQueue.main.async {
            self.backgroundCompletionHandler?()
            self.backgroundCompletionHandler = nil
        }
    }
}

class AppDelegate: NSObject, BackgroundApplicationDelegate {
    var backgroundTask: BackgroundApplication.BackgroundTaskIdentifier = .invalid

    func application(_ application: BackgroundApplication, didFinishLaunchingWithOptions launchOptions: [BackgroundApplication.LaunchOptionsKey: Any]?) -> Bool {
        _ = DownloadManager.shared.session
        return true
    }

    func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping () -> Void) {
        DownloadManager.shared.backgroundCompletionHandler = completionHandler
    }

    func finishWorkInTheBackground() {
        backgroundTask = BackgroundApplication.shared.beginBackgroundTask(withName: "finish") {
            BackgroundApplication.shared.endBackgroundTask(self.backgroundTask)
            self.backgroundTask = .invalid
        }
        if BackgroundApplication.shared.applicationState == .background {
            DownloadManager.shared.pauseAll()
        }
    }
}
