import BackgroundTransfer

// "Just a program": no entitlements literal, no app group. Its identity is derived from the
// executable (app program.fetch-later), its files live in its private container, and
// transferd relaunches this executable when its downloads are done.
//
//   fetch-later [--container PATH] URL   start a download that outlives this process
//   fetch-later [--container PATH]       list what has arrived in Documents/

final class Program: BackgroundApplicationDelegate {
    private var session: URLSession?

    func application(_ application: BackgroundApplication, didFinishLaunchingWithOptions launchOptions: [BackgroundApplication.LaunchOptionsKey: Any]?) -> Bool {
        guard !application.isLaunchedForBackgroundEvents else { return true }
        guard let argument = application.arguments.first else {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: application.documentsDirectory.path)) ?? []
            names.sorted().forEach { print($0) }
            exit(0)
        }
        guard let url = URL(string: argument) else {
            FileHandle.standardError.write(Data("usage: fetch-later [--container PATH] [URL]\n".utf8))
            exit(64)
        }
        let session = URLSession(configuration: .background(withIdentifier: "downloads"), delegate: Saver(), delegateQueue: nil)
        // Run again while its download still runs, it must not start a second one: the
        // session's tasks outlive the process (S7.2), so ask for them first.
        session.getAllTasks { tasks in
            if let running = tasks.first(where: { $0.originalRequest?.url == url }) {
                print("already downloading task \(running.taskIdentifier)")
                exit(0)
            }
            let task = session.downloadTask(with: url)
            task.resume()
            session.flush {
                if let error = session.invalidationError ?? task.error {
                    FileHandle.standardError.write(Data("fetch-later: \(error.localizedDescription)\n".utf8))
                    exit(1)
                }
                print("started task \(task.taskIdentifier)")
                exit(0)
            }
        }
        return true
    }

    func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping @Sendable () -> Void) {
        session = URLSession(configuration: .background(withIdentifier: identifier), delegate: Saver(completionHandler: completionHandler), delegateQueue: nil)
    }
}

/// Moves finished downloads into the program's Documents/.
final class Saver: URLSessionDownloadDelegate, @unchecked Sendable {
    private let completionHandler: (@Sendable () -> Void)?

    init(completionHandler: (@Sendable () -> Void)? = nil) {
        self.completionHandler = completionHandler
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        DelegateEventRecorder.urlSession(session, downloadTask: downloadTask, didFinishDownloadingTo: location) // for the tests
        let name = downloadTask.originalRequest?.url?.lastPathComponent ?? "download"
        let destination = BackgroundApplication.shared.documentsDirectory.appendingPathComponent(name)
        try? FileManager.default.removeItem(at: destination)
        do { try FileManager.default.moveItem(at: location, to: destination) } catch { print("cannot save \(name): \(error)") }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        DelegateEventRecorder.urlSession(session, task: task, didCompleteWithError: error)
    }

    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        DelegateEventRecorder.urlSessionDidFinishEvents(forBackgroundURLSession: session)
        DispatchQueue.main.async { self.completionHandler?() }
    }
}

BackgroundApplication.main(delegate: Program())
