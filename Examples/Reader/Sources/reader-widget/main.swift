import BackgroundTransfer

let entitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "com.example.reader.widget", "kind": "extension", "containingApp": "com.example.reader",
  "containingAppExecutable": "reader-app", "appGroups": ["group.com.example.reader"]}]
BGTRANSFER-ENTITLEMENTS-END
"""

/// `reader-widget [--container PATH] download URL`: starts a background download and exits
/// at once; transferd relaunches reader-app when it is done.
final class Widget: BackgroundApplicationDelegate {
    func application(_ application: BackgroundApplication, didFinishLaunchingWithOptions launchOptions: [BackgroundApplication.LaunchOptionsKey: Any]?) -> Bool {
        guard application.arguments.count == 2, application.arguments[0] == "download",
              let url = URL(string: application.arguments[1]) else {
            FileHandle.standardError.write(Data("usage: reader-widget [--container PATH] download URL\n".utf8))
            exit(64)
        }
        let configuration = URLSessionConfiguration.background(withIdentifier: "com.example.reader.widget.background")
        configuration.sharedContainerIdentifier = "group.com.example.reader" // extensions must share
        let session = URLSession(configuration: configuration, delegate: WidgetDelegate(), delegateQueue: nil)
        let task = session.downloadTask(with: url)
        task.resume()
        session.flush { // once transferd has the task on disk
            if let error = session.invalidationError ?? task.error {
                FileHandle.standardError.write(Data("reader-widget: \(error.localizedDescription)\n".utf8))
                exit(1)
            }
            print("started task \(task.taskIdentifier)")
            exit(0)
        }
        return true
    }
}

/// A widget still running when its download finishes gets the events itself, as on iOS: it
/// files the file where the app would.
final class WidgetDelegate: URLSessionDownloadDelegate, @unchecked Sendable {
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        DelegateEventRecorder.urlSession(session, downloadTask: downloadTask, didFinishDownloadingTo: location) // for the tests
        guard let group = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.reader"),
              let name = downloadTask.originalRequest?.url?.lastPathComponent, !name.isEmpty, name != "/" else { return }
        let folder = group.appendingPathComponent("Downloads")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
        if (try? FileManager.default.moveItem(at: location, to: folder.appendingPathComponent(name))) != nil { print("saved \(name)") }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        DelegateEventRecorder.urlSession(session, task: task, didCompleteWithError: error)
    }
}

BackgroundApplication.main(entitlements: entitlements, delegate: Widget())
