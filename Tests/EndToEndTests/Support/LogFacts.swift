import Foundation
import TransferContainer
import TransferLogging

/// The log lines the library and the stand-ins write at the moments the end-to-end tests wait
/// for, named once: a change of wording breaks this file, not every test that waits for it.
/// (Where the container holds the fact itself, a test reads that instead: pending events,
/// task records and `inspect --json`.)
extension LogEntry {
    /// `BackgroundApplication` called the app's `handleEventsForBackgroundURLSession`
    /// completion handler: the app is done with the session's events.
    var isCompletionHandlerCall: Bool { message.hasPrefix("completion handler called") }
    /// A stand-in started a download task (the daemon accepted it).
    var isStartedDownload: Bool { message.hasPrefix("started download task") }
    /// The daemon could not start an app it launched for events (`posix_spawn` failed).
    var isFailedRelaunch: Bool { event?.kind == .launchFailed }
    /// The daemon gave up relaunching an app until the user launches it (`RelaunchGiveUp`).
    var isRelaunchGivenUp: Bool { event?.kind == .relaunchGivenUp }
    /// The daemon launched `app` (any, if nil) for a session's events: the launched pid, else nil.
    func launched(_ app: String? = nil) -> Int32? {
        guard let event, event.kind == .launched, app == nil || event.app == app else { return nil }
        return event.pid
    }
    /// The daemon ended an app launched for events that outlived its background budget.
    var isBudgetExpired: Bool { event?.kind == .budgetExpired }
    /// The library in an app found it was launched for the line's session's events.
    var isLaunchedForEvents: Bool { event?.kind == .launchedForEvents }
    /// The library woke its app again, in the same process, for the line's session's later events.
    var isWokenForEvents: Bool { event?.kind == .wokenForEvents }
    /// The daemon opened the line's session for the process `pid`.
    func isSessionOpened(by pid: Int32) -> Bool { event?.kind == .sessionOpened && event?.pid == pid }
    /// The library reopened its session in a restarted daemon.
    var isReattached: Bool { event?.kind == .reattached }
    /// The code of a request of the library's that the daemon refused or could not carry out; nil for other lines.
    var failedRequestCode: Int? { event?.kind == .requestFailed ? event?.code : nil }
    /// A stand-in's delegate was called `didFinishDownloadingTo` for `task`.
    func isDidFinishDownloading(task: Int) -> Bool { isDidFinishDownloading && self.task == task }
    /// A stand-in's delegate was called `didFinishDownloadingTo`, for any task.
    var isDidFinishDownloading: Bool { category == "delegate" && message.hasPrefix("didFinishDownloadingTo") }
    /// The daemon decided not to relaunch an app for a session's waiting events: the app was
    /// force-quit, or its relaunches were given up on (said once a wait).
    var isRelaunchLeftToUser: Bool { event?.kind == .relaunchLeftToUser }
    /// A stand-in's delegate was called `didCompleteWithError` (for `task`).
    var isDidCompleteWithError: Bool { category == "delegate" && message.hasPrefix("didCompleteWithError") }
    /// … with no error, for `task`, after a response with `status`.
    func isDidCompleteWithoutError(task: Int, status: Int) -> Bool {
        isDidCompleteWithError && self.task == task && message.hasPrefix("didCompleteWithError(nil)") && message.hasSuffix("HTTP \(status)")
    }
    /// A stand-in's delegate was handed bytes of a body (`didReceive data`).
    var isDidReceiveData: Bool { category == "delegate" && message.hasPrefix("didReceive: ") }
    /// `host-app fetch` started its data task (S2.2).
    var isStartedDataTask: Bool { message.hasPrefix("started data task") }
    /// A stand-in's delegate was asked a server-trust question (`StandInDelegate`'s keychain check).
    var isServerTrustChallenge: Bool { category == "delegate" && message.hasPrefix("didReceive server trust challenge") }
    /// … and accepted the chain, which ends in a certificate its keychain trusts.
    var isAcceptedServerTrustChallenge: Bool { isServerTrustChallenge && message.hasSuffix("accepted") }
    /// A stand-in's delegate was called `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    var isDidFinishEvents: Bool { category == "delegate" && message.hasPrefix("urlSessionDidFinishEvents") }
    /// The daemon held a task for a retry: the attempt that failed and what it met (the
    /// typed fact the line carries, `LogEntry.hold`); nil for other lines.
    var retry: (attempt: Int, cause: RetryCause)? {
        guard case .retry(let attempt, _, let cause)? = hold else { return nil }
        return (attempt, cause)
    }
    /// The `URLError` code a stand-in's `didCompleteWithError` line gives ("… (-1202, …)"); nil for success.
    var completionCode: Int? {
        guard isDidCompleteWithError, let open = message.lastIndex(of: "(") else { return nil }
        return Int(message[message.index(after: open)...].prefix { $0 == "-" || $0.isNumber })
    }
}

extension TestContainer {
    /// Waits until `process` called its completion handler for background events (in `session`, if given).
    func waitForCompletionHandler(of process: String, session: String? = nil, timeout: TimeInterval = 30) -> LogEntry? {
        waitForLog(timeout: timeout) { $0.process == process && (session == nil || $0.session == session) && $0.isCompletionHandlerCall }
    }

    /// Waits until the process `pid` started its download task.
    func waitForStartedDownload(pid: Int32, timeout: TimeInterval = 30) -> LogEntry? {
        waitForLog(timeout: timeout) { $0.pid == pid && $0.isStartedDownload }
    }
}
