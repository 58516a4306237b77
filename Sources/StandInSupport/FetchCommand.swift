import BackgroundTransfer

/// `host-app fetch URL`: a data task in the host's background session (S2.2). It runs in this
/// process, while it lives: the command waits for it, keeps the body `didReceive data` handed
/// over in the app group's `Downloads/` (named after the URL) when it ends with a 2xx, and
/// exits 0; 1 when the task failed or the server answered otherwise. Runs on the main thread;
/// the delegate calls come on the session's queue.
enum FetchCommand {
    static let usage = "fetch URL"

    static func run(_ arguments: [String]) -> Never {
        guard arguments.count == 1, let url = URL(string: arguments[0]), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
            StandInProgram.hostUsage.usageError("fetch needs one http or https URL")
        }
        let delegate = StandInDelegate(echo: true)
        guard let session = StandInProgram.openSession(nil, scheduling: SchedulingOptions(), delegate: delegate) else { exit(2) }
        let task = session.dataTask(with: url)
        task.resume()
        print(String(task.taskIdentifier)) // a String: an Int is printed after run-time conformance searches, 0.15 ms of a start
        AppEnvironment.log.notice("app", "started data task \(task.taskIdentifier) for \(url.absoluteString)", session: session.configuration.identifier, task: task.taskIdentifier)
        let outcome = delegate.waitForCompletion(of: task.taskIdentifier, timeout: 600)
        guard outcome.finished, outcome.error == nil else { exit(1) }
        guard let status = (task.response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) else {
            StandInProgram.complain("data task \(task.taskIdentifier) ended without a 2xx answer; nothing saved")
            exit(1)
        }
        do {
            let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("fetch-\(getpid())")
            try delegate.body(of: task.taskIdentifier).write(to: temporary)
            let saved = try DownloadsFolder.adopt(temporary, name: DownloadsFolder.fileName(suggested: nil, url: url))
            print("saved \(saved.lastPathComponent)")
        } catch {
            StandInProgram.complain("cannot save the body of data task \(task.taskIdentifier): \(error)")
            exit(1)
        }
        exit(0)
    }
}
