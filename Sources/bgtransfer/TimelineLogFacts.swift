import Foundation
import TransferContainer
import TransferLogging

/// What one log line says, for the timeline. Lines about a waiting task carry their typed
/// fact (`LogEntry.hold`: a retry and its cause, a pause, a wait for a slot), read as it is.
/// For the others this is the one place that reads the wording of log messages: each case
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
    /// transferd (relaunch): "launched FAMILY (pid N) to handle events for background session ID"
    case relaunched(family: String, pid: Int32)
    /// transferd (relaunch, info): "launched app FAMILY (pid N) exited; K events still undelivered"
    case relaunchedAppExited(pid: Int32, pending: Int)
    /// transferd (relaunch): "FAMILY (pid N) did not call its completion handler within …; terminated"
    case backgroundBudgetExceeded(pid: Int32)
    /// transferd (relaunch): any other line naming the resume rate limiter (a relaunch held back)
    case rateLimited(String)
    /// transferd (relaunch): "FAMILY force-quit by the user: …"
    case forceQuit(String)
    /// transferd (relaunch): "FAMILY launched by the user: relaunching allowed again"
    case userLaunchAllowsRelaunch
    /// an app (application): "launched to handle events for background session ID"
    case launchedForEvents
    /// an app (application): "completion handler called; events acknowledged"
    case completionHandlerCalled
    /// transferd (events, info): "events through N acknowledged"
    case acknowledged(through: UInt64)
    /// an app or extension (delegate): "didFinishDownloadingTo: …", "didCompleteWithError(nil): …",
    /// "urlSessionDidFinishEvents(…)" and the others; `call` is the method's name.
    case delegate(call: String)
    /// transferd (conditions): "now network wifi, …"
    case conditions(String)
    /// transferd (sessions): "… opened the session: N unfinished tasks, K undelivered events"
    case sessionOpened
    /// the library (connection): "lost the transfer daemon; reconnecting"
    case lostDaemon
    case other

    init(_ entry: LogEntry) {
        switch entry.hold {
        case .retry(let attempt, let until, let cause)?: self = .retry(attempt: attempt, until: until, cause: cause)
        case .waitingForSlot(let holders)?: self = .waitingForSlot(holders)
        case let hold? where entry.category == "transfers": self = .paused(hold)
        default: self.init(words: entry)
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
        case ("relaunch", _) where m.hasPrefix("launched app ") && m.contains(" exited"):
            self = .relaunchedAppExited(pid: Self.pid(in: m) ?? 0, pending: Int(m.components(separatedBy: "; ").last?.prefix { $0.isNumber } ?? "") ?? 0)
        case ("relaunch", _) where m.hasPrefix("launched ") && m.contains("to handle events"):
            self = .relaunched(family: String(m.dropFirst(9).prefix { $0 != " " }), pid: Self.pid(in: m) ?? 0)
        case ("relaunch", _) where m.contains("did not call its completion handler"): self = .backgroundBudgetExceeded(pid: Self.pid(in: m) ?? 0)
        case ("relaunch", _) where m.contains("force-quit by the user"): self = .forceQuit(m)
        case ("relaunch", _) where m.contains("launched by the user"): self = .userLaunchAllowsRelaunch
        case ("relaunch", _) where m.localizedCaseInsensitiveContains("rate limit"): self = .rateLimited(m)
        case ("application", _) where m.hasPrefix("launched to handle events"): self = .launchedForEvents
        case ("application", _) where m.hasPrefix("completion handler called"): self = .completionHandlerCalled
        case ("events", _) where m.hasPrefix("events through "):
            self = UInt64(m.dropFirst("events through ".count).prefix { $0.isNumber }).map { .acknowledged(through: $0) } ?? .other
        case ("delegate", _):
            self = .delegate(call: String(m.prefix { $0 != ":" && $0 != "(" }))
        case ("conditions", _) where m.hasPrefix("now "): self = .conditions(String(m.dropFirst(4)))
        case ("sessions", _) where m.contains("opened the session"): self = .sessionOpened
        case ("connection", _) where m.hasPrefix("lost the transfer daemon"): self = .lostDaemon
        default: self = .other
        }
    }

    /// The number in "(pid N)".
    private static func pid(in message: String) -> Int32? {
        guard let range = message.range(of: "(pid ") else { return nil }
        return Int32(message[range.upperBound...].prefix { $0.isNumber })
    }
}
