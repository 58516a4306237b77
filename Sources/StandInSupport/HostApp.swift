import BackgroundTransfer
import TransferContainer
import CommandLineTools
import TransferPOSIX

/// The containing app: relaunched for a session's events, launched by the user, or told to
/// start a download.
public final class HostApp: BackgroundApplicationDelegate, @unchecked Sendable {
    private let application: BackgroundApplication
    private var sessions: [URLSession] = []
    /// The delegates of the sessions rebuilt for background events, by identifier (main queue).
    private var eventDelegates: [String: StandInDelegate] = [:]

    /// How long a background launch may take before giving up: iOS's background time, the
    /// daemon's default budget. It matters when the daemon that launched us died (and its
    /// budget with it): the session must not stay held by a lingering app.
    static let backgroundLaunchLimit: TimeInterval = 30

    init(application: BackgroundApplication) {
        self.application = application
    }

    /// Runs the app whose executable declares `entitlements` (see `Entitlements`).
    public static func main(entitlements: String) -> Never {
        let usage = StandInProgram.hostUsage
        usage.helpIfAsked(Array(CommandLine.arguments.dropFirst()))
        let application: BackgroundApplication
        do { application = try BackgroundApplication(entitlements: entitlements) } catch {
            usage.usageError("\(error)")
        }
        let app = HostApp(application: application)
        if application.isLaunchedForBackgroundEvents {
            application.deliverBackgroundLaunch(to: app)
            DispatchQueue.main.asyncAfter(deadline: .now() + backgroundLaunchLimit) {
                StandInProgram.complain("events were not finished within \(Int(backgroundLaunchLimit)) s")
                exit(1)
            }
            dispatchMain()
        }
        let arguments = application.arguments
        if arguments.first == "download" {
            app.download(Array(arguments.dropFirst()))
        }
        if arguments.first == "fetch" { FetchCommand.run(Array(arguments.dropFirst())) }
        if arguments.first == "remember-password" {
            guard arguments.count == 4 else { usage.usageError("remember-password needs REALM USER PASSWORD") }
            do { try Keychain.remember(realm: arguments[1], user: arguments[2], password: arguments[3]) } catch {
                StandInProgram.complain("cannot write \(Keychain.file.path): \(error)")
                exit(1)
            }
            exit(0)
        }
        if arguments.first == "trust-certificate" {
            guard arguments.count == 2 else { usage.usageError("trust-certificate needs one PEM file") }
            do {
                let added = try Keychain.trust(certificatesIn: arguments[1])
                print("\(added) certificate\(added == 1 ? "" : "s") trusted by com.example.host and its extensions")
            } catch {
                StandInProgram.complain("\(error)")
                exit(1)
            }
            exit(0)
        }
        if arguments.first == "enqueue" {
            guard arguments.count == 2 else { usage.usageError("enqueue needs one URL") }
            // Checked now: a URL refused later, in the background, would be dropped unseen.
            guard let url = URL(string: arguments[1]), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
                usage.usageError("enqueue: \"\(arguments[1])\" is not an http or https URL")
            }
            do { try DownloadQueue.append(arguments[1]) } catch {
                StandInProgram.complain("cannot write \(DownloadQueue.file.path): \(error.localizedDescription)")
                exit(1)
            }
            exit(0)
        }
        if let other = arguments.first { usage.usageError(CommandLineUsage.unknown(other)) }
        app.userLaunch()
    }

    // MARK: Relaunch for events (S3.2)

    public func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping @Sendable () -> Void) {
        DelegateEventRecorder.application(application, handleEventsForBackgroundURLSession: identifier)
        // Woken again in this process (it stayed): the session and its delegate are the launch's.
        if let delegate = eventDelegates[identifier] {
            delegate.onFinishEvents = finishingEvents(completionHandler, delegate: delegate)
            return
        }
        // Store the handler, rebuild the session through the coordinator, wait for the events.
        let delegate = StandInDelegate(echo: true)
        eventDelegates[identifier] = delegate
        delegate.onFinishEvents = finishingEvents(completionHandler, delegate: delegate)
        let session = URLSession(configuration: StandInProgram.configuration(identifier: identifier), delegate: delegate, delegateQueue: nil)
        if let error = session.invalidationError {
            StandInProgram.complain("cannot rebuild session \(identifier): \(error.localizedDescription)")
            exit(2)
        }
        sessions.append(session)
    }

    /// What the app does after `urlSessionDidFinishEvents`: on the main queue, calls the
    /// completion handler and exits, as iOS suspends it. For tests of an app woken again in
    /// the same process: with `HOST_APP_STAYS_AFTER_EVENTS=1` in the environment it stays.
    private func finishingEvents(_ completionHandler: @escaping @Sendable () -> Void,
                                 delegate: StandInDelegate) -> @Sendable () -> Void {
        let stays = ProcessInfo.processInfo.environment["HOST_APP_STAYS_AFTER_EVENTS"] == "1"
        return {
            DispatchQueue.main.async {
                Self.misbehaveOnceIfAsked()
                self.startQueuedDownload(delegate: delegate)
                completionHandler()
                if !stays { exit(0) }
            }
        }
    }

    /// Launched in the background: starts the next download of the queue (`host-app enqueue`).
    private func startQueuedDownload(delegate: StandInDelegate) {
        guard let next = DownloadQueue.popFirst() else { return }
        let command: DownloadCommand
        do { command = try DownloadCommand(arguments: [next]) } catch {
            StandInProgram.complain("queued download \(next): \(error)")
            return
        }
        if let (session, _) = StandInProgram.startDownload(command, delegate: delegate) { sessions.append(session) }
    }

    /// For tests of redelivery and of the background budget: with
    /// `HOST_APP_MISBEHAVE_ONCE=crash:<marker path>` (or `hang:<marker path>`) in the
    /// environment, the first relaunch takes its events and then dies by SIGKILL (or hangs)
    /// instead of calling the completion handler; the marker file makes it happen only once.
    static func misbehaveOnceIfAsked() {
        guard let value = ProcessInfo.processInfo.environment["HOST_APP_MISBEHAVE_ONCE"],
              let colon = value.firstIndex(of: ":") else { return }
        let marker = String(value[value.index(after: colon)...])
        guard !FileManager.default.fileExists(atPath: marker) else { return }
        _ = FileManager.default.createFile(atPath: marker, contents: Data("\(getpid())\n".utf8))
        if value.hasPrefix("hang:") {
            AppEnvironment.log.notice("application", "hanging instead of calling the completion handler (test hook)")
            while true { pause() }
        }
        AppEnvironment.log.notice("application", "crashing before calling the completion handler (test hook)")
        kill(getpid(), SIGKILL)
    }

    // MARK: Launched by the user

    /// Opens its own session and every extension session with events waiting, takes the
    /// events, prints the tasks still running, exits.
    func userLaunch() -> Never {
        let delegate = StandInDelegate(echo: true)
        var identifiers = [StandInIdentities.host.defaultSessionIdentifier.rawValue]
        identifiers += extensionSessionsWithEvents()
        var failed = false
        for identifier in identifiers {
            let session = URLSession(configuration: StandInProgram.configuration(identifier: identifier), delegate: delegate, delegateQueue: nil)
            if let error = session.invalidationError {
                StandInProgram.complain("cannot open session \(identifier): \(error.localizedDescription) (\((error as NSError).code))")
                failed = true
                continue
            }
            if !session.waitForPendingEvents(timeout: 60) {
                StandInProgram.complain("session \(identifier): events not delivered within 60 s")
                failed = true
            }
            let tasks = Self.allTasks(of: session)
            print("session \(identifier): \(tasks.count) unfinished tasks")
            for task in tasks {
                print("  task \(task.taskIdentifier) \(Self.stateName(task.state)) \(task.originalRequest?.url?.absoluteString ?? "") \(task.countOfBytesReceived)/\(task.countOfBytesExpectedToReceive)\(task.taskDescription.map { " \"\($0)\"" } ?? "")")
            }
            sessions.append(session)
        }
        exit(failed ? 1 : 0)
    }

    /// Extension sessions of this app family that have undelivered events on disk.
    private func extensionSessionsWithEvents() -> [String] {
        let family = AppEnvironment.layout.sessionsDirectory.appendingPathComponent(StandInIdentities.hostBundle.rawValue)
        let own = StandInIdentities.host.defaultSessionIdentifier.rawValue
        let names = (try? FileManager.default.contentsOfDirectory(atPath: family.path)) ?? []
        return names.sorted().filter { name in
            guard name != own else { return false }
            return JournalContents.hasUndeliveredEvents(session: family.appendingPathComponent(name))
        }
    }

    // MARK: download URL

    func download(_ arguments: [String]) -> Never {
        do {
            let command = try DownloadCommand(arguments: arguments)
            if command.foreground { foregroundDownload(command) }
            let delegate = StandInDelegate(echo: true)
            guard let (session, task) = StandInProgram.startDownload(command, delegate: delegate) else { exit(2) }
            sessions.append(session)
            if let how = command.invalidate {
                if how == "cancel" { session.invalidateAndCancel() } else { session.finishTasksAndInvalidate() }
                let invalidated = delegate.waitForInvalidation(timeout: 600)
                session.waitForDeliveries() // acknowledged: the app is not launched for them
                exit(invalidated ? 0 : 1)
            }
            if command.wait && command.noDelegate { exit(Self.waitForNoUnfinishedTasks(in: session, timeout: 600)) }
            if command.wait {
                let status = delegate.exitStatus(waitingFor: task, in: session, timeout: 600)
                session.waitForDeliveries() // acknowledged: the app is not launched for it
                exit(status)
            }
            exit(0)
        } catch {
            StandInProgram.hostUsage.usageError("\(error)")
        }
    }

    /// `download URL --foreground`: the download runs in a default session while the app has
    /// time; when its time runs out, the bytes so far go to the background session as resume
    /// data (or the download starts over there when the server cannot resume).
    func foregroundDownload(_ command: DownloadCommand) -> Never {
        guard let url = URL(string: command.url), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            StandInProgram.complain("refusing \"\(command.url)\": http and https URLs only")
            exit(2)
        }
        let delegate = StandInDelegate(echo: true)
        let foreground = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let task = foreground.downloadTask(with: url)
        sessions.append(foreground)
        let backgroundTime = application.beginBackgroundTask(withName: "download", timeLimit: command.timeLimit) {
            task.cancel { resumeData in
                let identifier = StandInIdentities.host.defaultSessionIdentifier.rawValue
                let background = URLSession(configuration: StandInProgram.configuration(identifier: identifier), delegate: StandInDelegate(echo: true), delegateQueue: nil)
                let continued = resumeData.map { background.downloadTask(withResumeData: $0) } ?? background.downloadTask(with: url)
                continued.resume()
                background.waitUntilDurable()
                let how = resumeData == nil ? "starting over" : "from \(task.countOfBytesReceived) bytes on disk"
                AppEnvironment.log.notice("app", "time ran out: download handed to the background session as task \(continued.taskIdentifier), \(how)", session: identifier, task: continued.taskIdentifier)
                print("handed over to background task \(continued.taskIdentifier) (\(how))")
                exit(0)
            }
        }
        task.resume()
        AppEnvironment.log.notice("app", "started foreground download for \(url.absoluteString)")
        DispatchQueue.global().async { [application] in
            let outcome = delegate.waitForCompletion(of: task.taskIdentifier, timeout: 86_400)
            guard outcome.finished, outcome.error == nil else { return } // cancelled: the handover exits
            DispatchQueue.main.async {
                application.endBackgroundTask(backgroundTime)
                exit(0)
            }
        }
        dispatchMain()
    }

    /// `download --wait --no-delegate`: with no delegate to hear of the end, looks at the
    /// session's tasks until none is left (or `timeout`), then lets the acknowledgements go.
    static func waitForNoUnfinishedTasks(in session: URLSession, timeout: TimeInterval) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while !allTasks(of: session).isEmpty {
            guard Date() < deadline else {
                StandInProgram.complain("tasks still unfinished after \(Int(timeout)) s")
                return 1
            }
            usleep(100_000) // no delegate calls to wait for: looking again is all there is
        }
        session.waitForDeliveries()
        return 0
    }

    static func allTasks(of session: URLSession) -> [URLSessionTask] {
        let done = DispatchSemaphore(value: 0)
        let result = Locked<[URLSessionTask]>([])
        session.getAllTasks { tasks in
            result.withLock { $0 = tasks }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 30)
        return result.withLock { $0 }.sorted { $0.taskIdentifier < $1.taskIdentifier }
    }

    static func stateName(_ state: URLSessionTask.State) -> String {
        switch state {
        case .running: "running"
        case .suspended: "suspended"
        case .canceling: "canceling"
        case .completed: "completed"
        }
    }
}

