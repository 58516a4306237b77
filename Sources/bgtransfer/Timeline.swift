import Foundation
import TransferContainer
import ProgressDisplay
import ContainerInspection

/// A task as the timeline names it: its session and its identifier within that session.
struct TimelineTaskKey: Hashable, Comparable {
    var session: String
    var task: Int

    var id: String { "\(session)#\(task)" }
    static func < (a: Self, b: Self) -> Bool { (a.session, a.task) < (b.session, b.task) }
}

/// One process drawn as a lane: a daemon incarnation (one `transferd` pid), an extension
/// process, a launch of the containing app (by the user, or by the daemon for events).
struct TimelineLane {
    enum Kind: String {
        case daemon
        case appExtension = "extension"
        case relaunchedApp = "relaunched-app"
        case userLaunchedApp = "app"
        case tool
    }

    var id: String
    var process: String
    var pid: Int32
    var kind: Kind
    /// "transferd [123] · daemon #2", "host-app [456] · relaunched for SESSION".
    var title: String
    var start: Date
    var end: Date
    /// How it ended, as far as the log tells: "stopped", "killed or crashed (no last word)", ….
    var ending: String
    /// Ended without saying so (a daemon killed, an app killed for its background budget).
    var endedAbruptly = false
    /// Still running when the page was made (its span reaches the right edge).
    var stillRunning = false
    /// For a lane that ended without a word: the latest time it can have ended (the next
    /// daemon's start, for a daemon); it died somewhere between `end` and this.
    var diedBy: Date?
}

/// Something that happened at one instant, on a process's lane and (when it concerns one) on
/// a task's bar.
struct TimelineMark {
    enum Kind: String {
        case created, resumed, started, retry, paused, finished, failed
        case relaunch, launched, delegate, acknowledged
        case daemonStarted = "daemon-started", daemonStopped = "daemon-stopped", killed
        case conditions, note
    }

    var time: Date
    var kind: Kind
    var lane: String?
    var task: TimelineTaskKey?
    /// A few words drawn beside the mark.
    var label: String
    /// The whole story, shown as the tooltip and in the event list.
    var detail: String
    /// The place in the log of the line the mark tells (nil: a mark no one line tells): the event
    /// list keeps the log's order among marks of the same time.
    var line: Int? = nil
}

/// A stretch of time during which a task waited, and why.
struct TimelineWait {
    enum Kind: String {
        case earliestBeginDate, backoff, retryAfter = "retry-after", rateLimiter = "rate-limiter"
        case conditions, discretionary, suspended, daemonDown = "daemon-down", delivery, authentication, slot, other
        /// Delivered to a process that has not acknowledged it (yet).
        case unacknowledged

        /// The kind of wait a `TaskHold` is.
        init(hold: TaskHold) {
            switch hold {
            case .earliestBeginDate: self = .earliestBeginDate
            case .retry(_, _, let cause): self = cause.isServerRequest ? .retryAfter : .backoff
            case .rateLimiter: self = .rateLimiter
            case .connectivity: self = .conditions
            case .discretionary: self = .discretionary
            case .suspended: self = .suspended
            case .authentication: self = .authentication
            case .waitingForSlot: self = .slot
            }
        }
    }

    var task: TimelineTaskKey
    var start: Date
    var end: Date
    var kind: Kind
    var reason: String
    /// Still waiting when the page was made.
    var open = false
}

/// One task's bar, from its creation to the acknowledgement of its completion event (or now).
struct TimelineTask {
    var key: TimelineTaskKey
    var kind: String
    var name: String
    var url: String
    var start: Date
    var end: Date
    /// "delivered and acknowledged", "finished: event 3 waiting for delivery", "running", ….
    var outcome: String
    var open: Bool
}

/// Everything the page draws, built from the container's log and journals; rendering is
/// `TimelineRenderer`'s business.
struct Timeline {
    var container: String
    var generated: Date
    var sessionFilter: String?
    var logPath: String
    var hasLog: Bool
    var lanes: [TimelineLane] = []
    var tasks: [TimelineTask] = []
    var marks: [TimelineMark] = []
    var waits: [TimelineWait] = []
    /// Per session with events waiting: why the app has not been woken (yet).
    var findings: [String] = []
    /// About the log itself (a level that hides creations and acknowledgements, …).
    var notes: [String] = []

    var start: Date? {
        (lanes.map(\.start) + tasks.map(\.start) + marks.map(\.time)).min()
    }
    var end: Date? {
        (lanes.map(\.end) + tasks.map(\.end) + marks.map(\.time) + waits.map(\.end)).max()
    }
}
