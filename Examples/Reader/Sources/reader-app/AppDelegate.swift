import BackgroundTransfer

let appGroup = "group.com.example.reader"

/// The app: relaunched by transferd when a session (its own or its widget's) has events.
final class AppDelegate: BackgroundApplicationDelegate {
    private var session: URLSession?

    func application(_ application: BackgroundApplication, didFinishLaunchingWithOptions launchOptions: [BackgroundApplication.LaunchOptionsKey: Any]?) -> Bool {
        if !application.isLaunchedForBackgroundEvents {
            // Launched by the user: list what has arrived, and quit.
            let folder = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup)?.appendingPathComponent("Downloads")
            let names = folder.flatMap { try? FileManager.default.contentsOfDirectory(atPath: $0.path) } ?? []
            names.sorted().forEach { print($0) }
            exit(0)
        }
        return true
    }

    func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping @Sendable () -> Void) {
        // Rebuild the session with the identifier the events are for (the widget's, here)
        // and the same app group; call the handler once the events are in.
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sharedContainerIdentifier = appGroup
        session = URLSession(configuration: configuration, delegate: DownloadDelegate(completionHandler: completionHandler), delegateQueue: nil)
    }
}

/// Moves each finished download into the app group's Downloads/.
final class DownloadDelegate: URLSessionDownloadDelegate, @unchecked Sendable {
    private let completionHandler: @Sendable () -> Void

    init(completionHandler: @escaping @Sendable () -> Void) {
        self.completionHandler = completionHandler
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        DelegateEventRecorder.urlSession(session, downloadTask: downloadTask, didFinishDownloadingTo: location) // for the tests
        // The file is removed when this method returns: move it now.
        guard let group = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup) else { return }
        let folder = group.appendingPathComponent("Downloads")
        let name = downloadTask.originalRequest?.url?.lastPathComponent ?? "download"
        let destination = folder.appendingPathComponent(name.isEmpty || name == "/" ? "download" : name)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.moveItem(at: location, to: destination)
            print("saved \(destination.path)")
        } catch {
            print("cannot save \(name): \(error)")
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        DelegateEventRecorder.urlSession(session, task: task, didCompleteWithError: error)
        if let error { print("task \(task.taskIdentifier) failed: \(error.localizedDescription)") }
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        DelegateEventRecorder.urlSessionDidFinishEvents(forBackgroundURLSession: session)
        DispatchQueue.main.async { self.completionHandler() } // on the main queue, as on iOS
    }
}
