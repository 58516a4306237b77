import Foundation
import TransferContainer
import TransferLogging

/// What one log line says, for the timeline. Lines that carry a typed fact are read by it:
/// relaunches and sessions by their `LogEntry.event`, a waiting task by its `LogEntry.hold`
/// (a retry and its cause, a pause, a wait for a slot). For the others this is the one place that reads the wording of log messages: each case
/// names the line it comes from, and a line whose wording changed falls through to `.other`
/// (still shown in the page's event list, just not drawn as anything special).
enum TimelineFact: Equatable {
    /// transferd: "transferd started (pid N) on PATH; …"
    case daemonStarted
    /// transferd: "transferd stopped", or "signal received; stopping …", or "idle for N s; exiting …"
    case daemonStopping(String)
    /// transferd: "the last transferd crashed while working on …"
    case daemonCrashedBefore
    /// transferd (tasks, info): "created download task N for URL"
    case created(kind: String, url: String)
    /// an app or extension (app): "started download task N for URL" / "started upload task …"
    case appStarted(url: String)
    /// transferd (tasks, info): "resumed" / "suspended"
    case resumed
    case suspended
    /// transferd (transfers, info): "started at offset N", "started upload of N bytes",
    /// "resuming the upload at N bytes", "asking the server how much of the upload it has"
    case transferStarted(offset: Int64?)
    /// transferd (transfers): a retry held back until `until` (its `TaskHold.retry`)
    case retry(attempt: Int, until: Date, cause: RetryCause)
    /// transferd (transfers): "paused: HOLD" (new device conditions forbid it), with its hold
    case paused(TaskHold)
    /// transferd (transfers, info): every slot taken, behind these sessions (`TaskHold.waitingForSlot`)
    case waitingForSlot([SlotHolder])
    /// transferd (transfers, info): "waiting for connectivity: PROBLEM"
    case waitingForConnectivity(String)
    /// transferd (transfers, info): "earliestBeginDate reached; asking willBeginDelayedRequest"
    case earliestBeginDateReached
    /// transferd (transfers): "finished: HTTP 200, N bytes" / "finished with task N, fetched once …"
    case finished(String)
    /// transferd (transfers): "failed: MESSAGE"; (tasks) "ended: MESSAGE" (cancelled)
    case failed(String)
    /// transferd (relaunch): an app launched for events (`LogEvent.launched`)
    case relaunched(family: String, pid: Int32)
    /// transferd (relaunch, info): an app launched for events exited (`LogEvent.launchedAppExited`)
    case relaunchedAppExited(pid: Int32, pending: Int)
    /// transferd (relaunch): a launched app's background budget ran out (`LogEvent.budgetExpired`)
    case backgroundBudgetExceeded(pid: Int32)
    /// transferd (relaunch): any other line naming the resume rate limiter (a relaunch held back)
    case rateLimited(String)
    /// transferd (relaunch): "FAMILY force-quit by the user: …"
    case forceQuit(String)
    /// transferd (relaunch): "FAMILY launched by the user: relaunching allowed again"
    case userLaunchAllowsRelaunch
    /// an app (application): launched for events (`LogEvent.launchedForEvents`)
    case launchedForEvents
    /// an app (application): woken again, in the same process, for later events (`LogEvent.wokenForEvents`)
    case wokenForEvents
    /// an app (application): "completion handler called; events acknowledged"
    case completionHandlerCalled
    /// transferd (events, info): "events through N acknowledged"
    case acknowledged(through: UInt64)
    /// an app or extension (delegate): "didFinishDownloadingTo: …", "didCompleteWithError(nil): …",
    /// "urlSessionDidFinishEvents(…)" and the others; `call` is the method's name.
    case delegate(call: String)
    /// transferd (conditions): "now network wifi, …"
    case conditions(String)
    /// transferd (sessions): a process opened a session (`LogEvent.sessionOpened`)
    case sessionOpened
    /// the library (connection): "lost the transfer daemon; reconnecting"
    case lostDaemon
    case other

    init(_ entry: LogEntry) {
        if let fact = Self.fact(of: entry.event) {
            self = fact
            return
        }
        switch entry.hold {
        case .retry(let attempt, let until, let cause)?: self = .retry(attempt: attempt, until: until, cause: cause)
        case .waitingForSlot(let holders)?: self = .waitingForSlot(holders)
        case let hold? where entry.category == "transfers": self = .paused(hold)
        default: self.init(words: entry)
        }
    }

    /// The facts of lines that carry a typed event (`LogEntry.event`), read as they are.
    private static func fact(of event: LogEvent?) -> TimelineFact? {
        guard let event else { return nil }
        switch event.kind {
        case .launched: return .relaunched(family: event.app ?? "?", pid: event.pid ?? 0)
        case .launchedAppExited: return .relaunchedAppExited(pid: event.pid ?? 0, pending: event.pending ?? 0)
        case .budgetExpired: return .backgroundBudgetExceeded(pid: event.pid ?? 0)
        case .sessionOpened: return .sessionOpened
        case .launchedForEvents: return .launchedForEvents
        case .wokenForEvents: return .wokenForEvents
        case .launchFailed, .relaunchGivenUp, .relaunchLeftToUser, .reattached, .requestFailed,
             .finishedFileNamedAtLoad, .finishedFileGone, .crashMarkNotCounted, .eventsWithoutDelegate,
             .idleConnectionClosed, .deviceRootsRefused:
            return nil
        }
    }

    /// The facts of lines without a typed hold, from their words.
    private init(words entry: LogEntry) {
        let m = entry.message
        switch (entry.category, m) {
        case ("daemon", _) where m.hasPrefix("transferd started"): self = .daemonStarted
        case ("daemon", _) where m == "transferd stopped" || m.hasPrefix("signal received") || m.hasPrefix("idle for"): self = .daemonStopping(m)
        case ("daemon", _) where m.hasPrefix("the last transferd crashed"): self = .daemonCrashedBefore
        case ("tasks", _) where m.hasPrefix("created "):
            // "created download task 3 for http://…"
            let words = m.split(separator: " ", maxSplits: 5)
            self = .created(kind: words.count > 1 ? String(words[1]) : "?", url: words.count > 5 ? String(words[5]) : "")
        case ("tasks", "resumed"): self = .resumed
        case ("tasks", "suspended"): self = .suspended
        case ("tasks", _) where m.hasPrefix("ended: "): self = .failed(String(m.dropFirst(7)))
        case ("app", _) where m.hasPrefix("started ") && m.contains(" task "):
            self = .appStarted(url: m.components(separatedBy: " for ").last ?? "")
        case ("transfers", _) where m.hasPrefix("started at offset "):
            self = .transferStarted(offset: Int64(m.dropFirst("started at offset ".count)))
        case ("transfers", _) where m.hasPrefix("started upload of "): self = .transferStarted(offset: 0)
        case ("transfers", _) where m.hasPrefix("resuming the upload at "):
            self = .transferStarted(offset: Int64(m.dropFirst("resuming the upload at ".count).prefix { $0.isNumber }))
        case ("transfers", _) where m.hasPrefix("asking the server how much"): self = .transferStarted(offset: nil)
        case ("transfers", _) where m.hasPrefix("waiting for connectivity: "): self = .waitingForConnectivity(String(m.dropFirst(26)))
        case ("transfers", _) where m.hasPrefix("earliestBeginDate reached"): self = .earliestBeginDateReached
        case ("transfers", _) where m.hasPrefix("finished"): self = .finished(m)
        case ("transfers", _) where m.hasPrefix("failed: "): self = .failed(String(m.dropFirst(8)))
        case ("relaunch", _) where m.contains("force-quit by the user"): self = .forceQuit(m)
        case ("relaunch", _) where m.contains("launched by the user"): self = .userLaunchAllowsRelaunch
        case ("relaunch", _) where m.localizedCaseInsensitiveContains("rate limit"): self = .rateLimited(m)
        case ("application", _) where m.hasPrefix("completion handler called"): self = .completionHandlerCalled
        case ("events", _) where m.hasPrefix("events through "):
            self = UInt64(m.dropFirst("events through ".count).prefix { $0.isNumber }).map { .acknowledged(through: $0) } ?? .other
        case ("delegate", _):
            self = .delegate(call: String(m.prefix { $0 != ":" && $0 != "(" }))
        case ("conditions", _) where m.hasPrefix("now "): self = .conditions(String(m.dropFirst(4)))
        case ("connection", _) where m.hasPrefix("lost the transfer daemon"): self = .lostDaemon
        default: self = .other
        }
    }
}
