import BackgroundTransfer
import CommandLineTools

/// `download URL [--description TEXT] [--session ID] [--wait]` and the scheduling options:
/// the command line shared by the host app and the extensions.
public struct DownloadCommand {
    public var url: String
    public var taskDescription: String?
    /// Overrides the bundle-derived session identifier (to try identifiers out).
    public var sessionIdentifier: String?
    public var wait = false
    /// Download in a default (in-process) session while the app has time, then hand the
    /// bytes to the background session.
    public var foreground = false
    public var timeLimit: TimeInterval = 30
    /// After handing the task over: `finish` (finishTasksAndInvalidate) or `cancel`
    /// (invalidateAndCancel), then wait for didBecomeInvalidWithError and exit.
    public var invalidate: String?
    /// Opens the session with no delegate (to see what an app that forgets one gets, S1.2);
    /// with `--wait`, waits until the session has no unfinished task.
    public var noDelegate = false
    public var scheduling = SchedulingOptions()

    public static let usage = "download URL [--description TEXT] [--session IDENTIFIER] [--wait] "
        + "[--foreground [--time-limit SECONDS]] [--invalidate finish|cancel] [--no-delegate] "
        + SchedulingOptions.usage

    public init(arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        guard let url = rest.popFirst() else { throw UsageError("download needs a URL") }
        self.url = url
        while let option = rest.popFirst() {
            switch option {
            case "--description": taskDescription = try optionValue(for: option, &rest)
            case "--session": sessionIdentifier = try optionValue(for: option, &rest)
            case "--wait": wait = true
            case "--foreground": foreground = true
            case "--no-delegate": noDelegate = true
            case "--invalidate":
                let how = try optionValue(for: option, &rest)
                guard how == "finish" || how == "cancel" else { throw UsageError("--invalidate takes finish or cancel") }
                invalidate = how
            case "--time-limit":
                guard let seconds = TimeInterval(try optionValue(for: option, &rest)), seconds >= 0 else { throw UsageError("--time-limit needs a number of seconds") }
                timeLimit = seconds
            default:
                guard try scheduling.parse(option, &rest) else { throw UsageError("unknown option \(option)") }
            }
        }
    }
}

/// A command line that cannot be understood.
public struct UsageError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// What the stand-in executables do; each `main.swift` calls one of these.
public enum StandInProgram {
    /// This executable's name, as it was run.
    static var name: String { (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent }) ?? "stand-in" }

    /// An extension's command line (`fetch-extension`, `share-extension`).
    static var extensionUsage: CommandLineUsage {
        CommandLineUsage(program: name, forms: ["[--container PATH] \(DownloadCommand.usage)", "[--container PATH] \(UploadCommand.usage)"], details: """
            SUBCOMMANDS:
              download URL      start a background download in the extension's session and exit at once
                                (--wait: until it completes, saying why it waits; exit 1 unless a 2xx answer)
              upload FILE URL   start a background upload of FILE, likewise

            SCHEDULING: \(SchedulingOptions.usage)
            """)
    }

    /// The containing app's command line (`host-app`).
    static var hostUsage: CommandLineUsage {
        CommandLineUsage(program: name, forms: ["[--container PATH]", "[--container PATH] \(DownloadCommand.usage)", "[--container PATH] enqueue URL", "[--container PATH] \(FetchCommand.usage)",
                                                "[--container PATH] remember-password REALM USER PASSWORD", "[--container PATH] trust-certificate FILE.pem",
                                                "[--container PATH] --handle-events-for-background-session ID"], details: """
            SUBCOMMANDS:
              (none)                          a user launch: take pending events, print the session's tasks
              download URL                    a download in the host's own session (--foreground: in-process first)
              enqueue URL                     started the next time the host is launched in the background
              fetch URL                       a data task in the host's session, while it runs; the body to Downloads/
              remember-password REALM USER PASSWORD
                                              the host's keychain, for authentication challenges
              trust-certificate FILE.pem      trust the root(s) in FILE for HTTPS: the host and its
                                              extensions accept servers whose chain ends in them
              --handle-events-for-background-session ID
                                              the relaunch entry point (transferd launches the host so)

            SCHEDULING: \(SchedulingOptions.usage)
            """)
    }

    /// Prints to stderr with the program's name.
    public static func complain(_ text: String) {
        let name = (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent }) ?? "stand-in"
        FileHandle.standardError.write(Data("\(name): \(text)\n".utf8))
    }

    /// The background configuration the stand-ins use: their bundle's identifier, the app group.
    static func configuration(identifier: String) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sharedContainerIdentifier = StandInIdentities.appGroup.rawValue
        return configuration
    }

    /// Opens a session, creates and resumes a download, prints its task identifier.
    /// Returns the session and task, or nil after printing why not.
    static func startDownload(_ command: DownloadCommand, delegate: StandInDelegate) -> (URLSession, URLSessionDownloadTask)? {
        guard let url = URL(string: command.url), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false else {
            complain("refusing \"\(command.url)\": background sessions download http and https URLs only")
            return nil
        }
        let sessionDelegate = command.noDelegate ? nil : delegate
        guard let session = openSession(command.sessionIdentifier, scheduling: command.scheduling,
                                        delegate: sessionDelegate) else { return nil }
        let task = session.downloadTask(with: url)
        let note = "started download task \(task.taskIdentifier) for \(url.absoluteString)"
        guard handOver(task, in: session, description: command.taskDescription, scheduling: command.scheduling,
                       wait: command.wait && !command.noDelegate, delegate: delegate, note: note) else { return nil }
        return (session, task)
    }

    /// Opens the process's background session (or `identifier`); nil after saying why not.
    static func openSession(_ identifier: String?, scheduling: SchedulingOptions,
                            delegate: StandInDelegate?) -> URLSession? {
        let identifier = identifier ?? AppEnvironment.identity.defaultSessionIdentifier.rawValue
        let configuration = configuration(identifier: identifier)
        scheduling.configure(configuration)
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        if let error = session.invalidationError {
            complain("cannot open background session: \(error.localizedDescription) (\((error as NSError).code))")
            return nil
        }
        return session
    }

    /// Describes and resumes a new task, prints its identifier (what the tests and the demo
    /// read), and shows its progress while waiting when asked to. False, after saying why,
    /// when the daemon refused the task (a full disk) or did not confirm it.
    static func handOver(_ task: URLSessionTask, in session: URLSession, description: String?, scheduling: SchedulingOptions, wait: Bool, delegate: StandInDelegate, note: String) -> Bool {
        if let description { task.taskDescription = description }
        scheduling.apply(to: task)
        task.resume()
        // The printed identifier means the daemon has the task on disk.
        guard session.waitUntilDurable() else {
            complain("the transfer daemon did not confirm task \(task.taskIdentifier) in time; not started")
            return false
        }
        // Refused, or ended by the daemon as it was resumed (an upload's file it may not read):
        // `flush` shows such a task completed with its error, never as accepted.
        if task.wasRefusedByDaemon || task.wasRefusedAtResume {
            let error = task.error as NSError?
            let reason = error?.localizedDescription ?? "no error"
            complain("task \(task.taskIdentifier) was refused: \(reason) (\(error?.code ?? 0))")
            return false
        }
        print(String(task.taskIdentifier)) // a String: an Int is printed after run-time conformance searches, 0.15 ms of a start
        if wait { delegate.showProgress(on: WaitProgressBar.onTerminal(), of: task.taskIdentifier) }
        AppEnvironment.log.notice("app", note, session: session.configuration.identifier, task: task.taskIdentifier)
        return true
    }

    /// An extension: `download URL` or `upload FILE URL` starts a transfer in its own session
    /// and exits at once.
    public static func runExtension(entitlements: String) -> Never {
        // Its usage is built only when printed: an extension that hands a task over and exits
        // has no use for it (a quarter of a millisecond of its start).
        let commandLine = Array(CommandLine.arguments.dropFirst())
        if CommandLineUsage.asksForItself(commandLine) { extensionUsage.helpIfAsked(commandLine) }
        let application: BackgroundApplication
        do { application = try BackgroundApplication(entitlements: entitlements) } catch {
            extensionUsage.usageError("\(error)")
        }
        let arguments = application.arguments
        let delegate = StandInDelegate(echo: true)
        let started: (session: URLSession, task: URLSessionTask, wait: Bool)?
        do {
            switch arguments.first {
            case "download":
                let command = try DownloadCommand(arguments: Array(arguments.dropFirst()))
                started = startDownload(command, delegate: delegate).map { ($0.0, $0.1, command.wait) }
                if command.noDelegate, command.wait, let started {
                    exit(HostApp.waitForNoUnfinishedTasks(in: started.session, timeout: 600))
                }
            case "upload":
                let command = try UploadCommand(arguments: Array(arguments.dropFirst()))
                started = startUpload(command, delegate: delegate).map { ($0.0, $0.1, command.wait) }
            case let other?:
                extensionUsage.usageError(CommandLineUsage.unknown(other))
            case nil:
                extensionUsage.usageError("missing subcommand: download or upload")
            }
        } catch {
            extensionUsage.usageError("\(error)")
        }
        guard let started else { exit(2) }
        if started.wait {
            let status = delegate.exitStatus(waitingFor: started.task, in: started.session, timeout: 600)
            started.session.waitForDeliveries() // acknowledged: the app is not launched for it
            exit(status)
        }
        // Extensions exit as soon as their work is handed over.
        exit(0)
    }
}
