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
}

/// A stretch of time during which a task waited, and why.
struct TimelineWait {
    enum Kind: String {
        case earliestBeginDate, backoff, retryAfter = "retry-after", rateLimiter = "rate-limiter"
        case conditions, discretionary, suspended, daemonDown = "daemon-down", delivery, authentication, other
        /// Delivered to a process that has not acknowledged it (yet).
        case unacknowledged

        /// The kind of a `TaskHold` description (what `inspect` prints, or a "paused: …" line).
        init(hold: String) {
            switch true {
            case hold.hasPrefix("waiting for earliestBeginDate"): self = .earliestBeginDate
            case hold.hasPrefix("waiting to retry"): self = hold.contains("503") || hold.contains("Retry-After") ? .retryAfter : .backoff
            case hold.contains("rate limiter"): self = .rateLimiter
            case hold.hasPrefix("waiting for connectivity"): self = .conditions
            case hold.hasPrefix("discretionary"): self = .discretionary
            case hold.hasPrefix("suspended"): self = .suspended
            case hold.contains("authentication"): self = .authentication
            default: self = .other
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

/// Builds a `Timeline` from log entries, the sessions' journals and a snapshot of the
/// container: processes from the entries' process and pid, task facts from `TimelineFact`,
/// and what is still pending (tasks, events, the reasons they wait) from the journals.
struct TimelineBuilder {
    var layout: ContainerLayout
    var sessionFilter: String?
    var now = Date()

    /// What the sessions' journals still hold, line by line (a journal keeps every change
    /// until it is compacted): each task's records, oldest first (its earlier records still tell
    /// its `earliestBeginDate` and rate-limited start), and the number of each task's event.
    struct JournalHistory {
        var tasks: [String: [Int: [TaskRecord]]] = [:]
        var eventNumbers: [String: [Int: UInt64]] = [:]

        static func read(_ layout: ContainerLayout) -> JournalHistory {
            var history = JournalHistory()
            let fm = FileManager.default
            for family in (try? fm.contentsOfDirectory(atPath: layout.sessionsDirectory.path)) ?? [] {
                let familyDirectory = layout.sessionsDirectory.appendingPathComponent(family)
                for identifier in (try? fm.contentsOfDirectory(atPath: familyDirectory.path)) ?? [] {
                    let path = JournalContents.path(inSession: familyDirectory.appendingPathComponent(identifier))
                    guard let data = fm.contents(atPath: path) else { continue }
                    for line in data.split(separator: 0x0A) {
                        guard let decoded = try? RecordCoding.decode(JournalLine.self, from: Data(line)) else { continue }
                        if let task = decoded.task { history.tasks[identifier, default: [:]][task.taskIdentifier, default: []].append(task) }
                        if let event = decoded.event {
                            history.tasks[identifier, default: [:]][event.task.taskIdentifier, default: []].append(event.task)
                            history.eventNumbers[identifier, default: [:]][event.task.taskIdentifier] = event.number
                        }
                    }
                }
            }
            return history
        }
    }

    /// The timeline of `allEntries` (the whole log; `sessionFilter` applied here), with what
    /// `snapshot` and `history` add about tasks and events still pending.
    func build(entries allEntries: [LogEntry], hasLog: Bool, snapshot: ContainerSnapshot, journal history: JournalHistory) -> Timeline {
        let journal = history.tasks
        var timeline = Timeline(container: layout.root.path, generated: now, sessionFilter: sessionFilter, logPath: layout.logFile.path, hasLog: hasLog)
        let entries = keep(allEntries).enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        let facts = entries.map(TimelineFact.init)
        let sessions = snapshot.sessions.filter { sessionFilter == nil || $0.identifier == sessionFilter }

        // Processes.
        let lanes = buildLanes(entries, facts, snapshot: snapshot)
        timeline.lanes = lanes
        let laneID = { (entry: LogEntry) in Self.laneID(entry.process, entry.pid) }

        // Tasks: from the log, and from the journals (tasks and events still pending).
        var keys = Set<TimelineTaskKey>()
        for entry in entries { if let session = entry.session, let task = entry.task { keys.insert(TimelineTaskKey(session: session, task: task)) } }
        for session in sessions {
            for task in session.tasks { keys.insert(TimelineTaskKey(session: session.identifier, task: task.taskIdentifier)) }
            for event in session.pendingEvents { keys.insert(TimelineTaskKey(session: session.identifier, task: event.taskIdentifier)) }
        }
        for (session, tasks) in journal where sessionFilter == nil || session == sessionFilter {
            for task in tasks.keys { keys.insert(TimelineTaskKey(session: session, task: task)) }
        }

        // Session-wide moments: relaunches, acknowledgements, the end of a delivery.
        var relaunches: [String: [(Date, String, Int32)]] = [:]
        var acknowledgements: [String: [(Date, String, String, UInt64?)]] = [:] // time, lane, how, through which event
        for (entry, fact) in zip(entries, facts) {
            guard let session = entry.session else { continue }
            switch fact {
            case .relaunched(let family, let pid): relaunches[session, default: []].append((entry.time, family, pid))
            case .completionHandlerCalled: acknowledgements[session, default: []].append((entry.time, laneID(entry), "\(entry.process) called its completion handler: events acknowledged", nil))
            case .acknowledged(let through): acknowledgements[session, default: []].append((entry.time, laneID(entry), "the daemon recorded events through \(through) as acknowledged", through))
            default: break
            }
        }

        // Lane marks (session-wide and process-wide facts).
        for (entry, fact) in zip(entries, facts) {
            let lane = laneID(entry)
            let where_ = "\(entry.process) [\(entry.pid)]"
            switch fact {
            case .daemonStarted: timeline.marks.append(TimelineMark(time: entry.time, kind: .daemonStarted, lane: lane, label: "started", detail: "\(where_): \(entry.message)"))
            case .daemonStopping(let text):
                let last = !zip(entries, facts).contains { later in
                    if case .daemonStopping = later.1, later.0.pid == entry.pid, later.0.time > entry.time { return true } else { return false }
                }
                timeline.marks.append(TimelineMark(time: entry.time, kind: .daemonStopped, lane: lane, label: last ? "stopped" : "", detail: "\(where_): \(text)"))
            case .daemonCrashedBefore: timeline.marks.append(TimelineMark(time: entry.time, kind: .note, lane: lane, label: "previous crashed", detail: "\(where_): \(entry.message)"))
            case .relaunched(let family, let pid):
                timeline.marks.append(TimelineMark(time: entry.time, kind: .relaunch, lane: lane, label: "relaunch \(family)", detail: "\(where_) relaunched \(family) as pid \(pid) for the events of \(entry.session ?? "?")"))
            case .backgroundBudgetExceeded, .forceQuit, .userLaunchAllowsRelaunch, .rateLimited, .relaunchedAppExited:
                timeline.marks.append(TimelineMark(time: entry.time, kind: .note, lane: lane, label: "", detail: "\(where_): \(entry.message)"))
            case .launchedForEvents: timeline.marks.append(TimelineMark(time: entry.time, kind: .launched, lane: lane, label: "launched for events", detail: "\(where_): \(entry.message)"))
            case .completionHandlerCalled: timeline.marks.append(TimelineMark(time: entry.time, kind: .acknowledged, lane: lane, label: "completion handler", detail: "\(where_): \(entry.message)"))
            case .acknowledged: timeline.marks.append(TimelineMark(time: entry.time, kind: .acknowledged, lane: lane, label: "ack", detail: "\(where_): \(entry.message) [\(entry.session ?? "")]"))
            case .delegate(let call) where entry.task == nil: timeline.marks.append(TimelineMark(time: entry.time, kind: .delegate, lane: lane, label: Self.shortCall(call), detail: "\(where_): \(entry.message)"))
            case .conditions(let text): timeline.marks.append(TimelineMark(time: entry.time, kind: .conditions, lane: lane, label: "conditions", detail: "device conditions now \(text)"))
            case .lostDaemon: timeline.marks.append(TimelineMark(time: entry.time, kind: .note, lane: lane, label: "", detail: "\(where_): \(entry.message)"))
            default: break
            }
        }

        // Daemon incarnations that ended without a word: killed or crashed.
        let daemons = lanes.filter { $0.kind == .daemon }.sorted { $0.start < $1.start }
        for lane in daemons where lane.endedAbruptly {
            timeline.marks.append(TimelineMark(time: lane.diedBy ?? lane.end, kind: .killed, lane: lane.id, label: "killed", detail: "\(lane.title): \(lane.ending)"))
        }

        // Each task's facts, bar and waits.
        let snapshotTasks = Dictionary(sessions.flatMap { s in s.tasks.map { (TimelineTaskKey(session: s.identifier, task: $0.taskIdentifier), $0) } }, uniquingKeysWith: { a, _ in a })
        let pendingEvents = Dictionary(sessions.flatMap { s in s.pendingEvents.map { (TimelineTaskKey(session: s.identifier, task: $0.taskIdentifier), $0) } }, uniquingKeysWith: { a, _ in a })
        let waitingNow = Dictionary(sessions.flatMap { s in s.waiting.compactMap { k, v in Int(k).map { (TimelineTaskKey(session: s.identifier, task: $0), v) } } }, uniquingKeysWith: { a, _ in a })
        let lastLogTime = entries.last?.time
        var factsByTask: [TimelineTaskKey: [(LogEntry, TimelineFact)]] = [:]
        for (entry, fact) in zip(entries, facts) {
            if let session = entry.session, let task = entry.task { factsByTask[TimelineTaskKey(session: session, task: task), default: []].append((entry, fact)) }
        }
        let sources = Sources(history: history, snapshot: snapshot, factsByTask: factsByTask, lanes: lanes, daemons: daemons, relaunches: relaunches,
                              acknowledgements: acknowledgements, snapshotTasks: snapshotTasks, pendingEvents: pendingEvents, waitingNow: waitingNow, lastLogTime: lastLogTime)
        for key in keys.sorted() {
            let (task, marks, waits) = story(of: key, sources)
            timeline.tasks.append(task)
            timeline.marks += marks
            timeline.waits += waits
        }

        // Why the app was (not) woken, per session.
        for session in sessions {
            if session.pendingEvents.isEmpty { continue }
            let reasons = findingsForSession(session.identifier, snapshot: snapshot)
            timeline.findings.append("\(session.identifier): \(session.pendingEvents.count) event\(session.pendingEvents.count == 1 ? "" : "s") not yet acknowledged: \(reasons.joined(separator: "; "))")
        }
        if hasLog, !allEntries.contains(where: { $0.level < .notice }) {
            timeline.notes.append("The log holds no info lines (the default level is notice): task creation, transfer starts and resumes and the daemon's acknowledgements are missing. Run the processes with BGTRANSFER_LOG_LEVEL=info to see them.")
        }
        if hasLog, let filter = sessionFilter, !allEntries.contains(where: { $0.session == filter }) {
            timeline.notes.append("No log line names the session \(filter).")
        }
        return timeline
    }

    /// What the whole log and the journals say, gathered once, for telling each task's story.
    private struct Sources {
        var history: JournalHistory
        var snapshot: ContainerSnapshot
        var factsByTask: [TimelineTaskKey: [(LogEntry, TimelineFact)]]
        var lanes: [TimelineLane]
        /// Daemon incarnations, oldest first.
        var daemons: [TimelineLane]
        /// Per session: when the daemon relaunched which app as which pid.
        var relaunches: [String: [(Date, String, Int32)]]
        /// Per session: when, on which lane, how, and through which event (when the line says).
        var acknowledgements: [String: [(Date, String, String, UInt64?)]]
        var snapshotTasks: [TimelineTaskKey: TaskRecord]
        var pendingEvents: [TimelineTaskKey: ContainerSnapshot.PendingEvent]
        /// What holds each pending task back now (`TaskHold` descriptions).
        var waitingNow: [TimelineTaskKey: String]
        var lastLogTime: Date?
    }

    /// One task's bar, marks and waits: its own log lines in order, the daemon deaths it lived
    /// through, what its journal records say, and its completion event until acknowledged.
    private func story(of key: TimelineTaskKey, _ sources: Sources) -> (TimelineTask, [TimelineMark], [TimelineWait]) {
        let (history, snapshot, lanes, daemons) = (sources.history, sources.snapshot, sources.lanes, sources.daemons)
        let journal = history.tasks
        let laneID = { (entry: LogEntry) in Self.laneID(entry.process, entry.pid) }
        let (snapshotTasks, pendingEvents, waitingNow, lastLogTime) = (sources.snapshotTasks, sources.pendingEvents, sources.waitingNow, sources.lastLogTime)
        let (factsByTask, relaunches, acknowledgements) = (sources.factsByTask, sources.relaunches, sources.acknowledgements)
        let records = journal[key.session]?[key.task] ?? []
        let record = snapshotTasks[key] ?? records.last
        let mine = factsByTask[key] ?? []
        var task = TimelineTask(key: key, kind: record?.kind.rawValue ?? "task", name: "", url: record?.originalRequest.url ?? "",
                                start: [records.first?.createdAt, mine.first?.0.time].compactMap { $0 }.min() ?? now, end: now, outcome: "", open: false)
        var marks: [TimelineMark] = []
        var waits: [TimelineWait] = []
        var openWait: (Date, TimelineWait.Kind, String)? // waiting until the next start
        var finishedAt: Date?
        var deliveredAt: Date?
        func closeWait(at time: Date) {
            if let (start, kind, reason) = openWait, time > start { waits.append(TimelineWait(task: key, start: start, end: time, kind: kind, reason: reason)) }
            openWait = nil
        }
        for (entry, fact) in mine {
            let lane = laneID(entry)
            let where_ = "\(entry.process) [\(entry.pid)]"
            func mark(_ kind: TimelineMark.Kind, _ label: String) {
                marks.append(TimelineMark(time: entry.time, kind: kind, lane: lane, task: key, label: label, detail: "\(where_): \(entry.message)"))
            }
            switch fact {
            case .created(let kind, let url):
                mark(.created, "created")
                task.kind = kind
                if task.url.isEmpty { task.url = url }
            case .appStarted(let url):
                mark(.resumed, "resume()")
                if task.url.isEmpty { task.url = url }
            case .resumed: mark(.resumed, "resumed")
            case .suspended:
                mark(.paused, "suspended")
                openWait = (entry.time, .suspended, "suspended by the app")
            case .transferStarted(let offset):
                closeWait(at: entry.time)
                mark(.started, (offset ?? 0) > 0 ? "resumed at \(ProgressFormat.bytes(offset!))" : "transfer")
            case .retry(let reason, let attempt, let seconds):
                mark(.retry, "retry \(attempt)")
                let kind: TimelineWait.Kind = reason.contains("503") || reason.contains("Retry-After") ? .retryAfter : .backoff
                let why = kind == .retryAfter ? "the server asked to come back later (Retry-After)" : "backoff"
                waits.append(TimelineWait(task: key, start: entry.time, end: entry.time.addingTimeInterval(seconds), kind: kind,
                                          reason: "\(why): retry \(attempt) in \(String(format: "%.2f", seconds)) s after: \(reason)"))
            case .paused(let hold):
                mark(.paused, "paused")
                openWait = (entry.time, TimelineWait.Kind(hold: hold), "paused by new device conditions: \(hold)")
            case .waitingForConnectivity(let problem):
                mark(.paused, "no network")
                openWait = (entry.time, .conditions, "waiting for connectivity: \(problem)")
            case .earliestBeginDateReached: mark(.note, "begin date")
            case .finished(let text):
                closeWait(at: entry.time)
                mark(.finished, "finished")
                finishedAt = entry.time
                task.outcome = text
            case .failed(let text):
                closeWait(at: entry.time)
                mark(.failed, "failed")
                finishedAt = entry.time
                task.outcome = "failed: \(text)"
            case .delegate(let call):
                mark(.delegate, Self.shortCall(call))
                if call.hasPrefix("didCompleteWithError") { deliveredAt = entry.time }
                if call.hasPrefix("didCompleteWithError") && finishedAt == nil { finishedAt = entry.time }
            default:
                if entry.category == "auth" || entry.level >= .error { mark(.note, "") }
            }
        }
        // Daemon kills while transferring (found once the facts are in order). The daemon's
        // death is not logged: it lies between its last line and the next daemon's start.
        for daemon in daemons where daemon.endedAbruptly {
            let before = marks.filter { $0.time <= daemon.end }
            guard let last = before.last(where: { [.started, .retry, .paused, .finished, .failed].contains($0.kind) }), last.kind == .started, last.lane == daemon.id else { continue }
            let next = daemons.first { $0.start > daemon.end }
            let diedBy = daemon.diedBy ?? daemon.end
            let resumed = marks.first { $0.time > daemon.end && $0.kind == .started }
            marks.append(TimelineMark(time: diedBy, kind: .killed, lane: daemon.id, task: key, label: "transferd killed",
                                      detail: "\(daemon.title) died mid-transfer without a word (killed or crashed), after its last line at \(Self.clock(daemon.end))" + (next.map { " and before \($0.title) started at \(Self.clock($0.start))" } ?? "")))
            var reason = "transferd [\(daemon.pid)] was lost mid-transfer: its last line was at \(Self.clock(daemon.end)), it died (killed or crashed) before \(Self.clock(diedBy)); "
            reason += next.map { "\($0.title) started at \(Self.clock($0.start))" + (resumed.map { " and \($0.label) at \(Self.clock($0.time))" } ?? "") } ?? "no daemon has started since"
            waits.append(TimelineWait(task: key, start: daemon.end, end: resumed?.time ?? next?.start ?? now, kind: .daemonDown, reason: reason, open: resumed == nil && next == nil))
        }
        // What the journal records tell: a begin date, the rate limiter.
        // (Drawn up to now at most: the page shows what has happened, and says until when.)
        if let begin = records.compactMap(\.earliestBeginDate).last ?? record?.earliestBeginDate, begin > task.start {
            waits.append(TimelineWait(task: key, start: task.start, end: min(begin, now), kind: .earliestBeginDate,
                                      reason: "earliestBeginDate \(Self.clock(begin)): nothing is sent before it", open: begin > now))
        }
        if let until = records.compactMap(\.rateLimitedUntil).last ?? record?.rateLimitedUntil, until > task.start {
            waits.append(TimelineWait(task: key, start: task.start, end: min(until, now), kind: .rateLimiter,
                                      reason: "created in the background: waits out the app's resume rate limiter until \(Self.clock(until))", open: until > now))
        }
        // After the end: the completion event until it is delivered and acknowledged.
        // The first acknowledgement after the delivery (one through an earlier event than this task's does not count).
        let number = history.eventNumbers[key.session]?[key.task]
        let acknowledgement = (acknowledgements[key.session] ?? []).first { ack in
            ack.0 >= (deliveredAt ?? finishedAt ?? .distantFuture) && (number == nil || ack.3 == nil || ack.3! >= number!)
        }
        let stillPending = pendingEvents[key]
        if let finishedAt {
            let relaunch = (relaunches[key.session] ?? []).first { $0.0 >= finishedAt && $0.0 <= (acknowledgement?.0 ?? now) }
            if let relaunch {
                marks.append(TimelineMark(time: relaunch.0, kind: .relaunch, lane: Self.laneID("transferd", lanes.first { $0.kind == .daemon && $0.start <= relaunch.0 && $0.end >= relaunch.0 }?.pid ?? 0), task: key,
                                          label: "relaunch", detail: "the daemon relaunched \(relaunch.1) (pid \(relaunch.2)) to deliver this task's completion event"))
            }
            let deliveryStart = finishedAt
            let deliveryEnd = deliveredAt ?? relaunch?.0 ?? acknowledgement?.0
            if let deliveryEnd, deliveryEnd.timeIntervalSince(deliveryStart) > 0 {
                let why = relaunch.map { r in
                    let after = r.0.timeIntervalSince(deliveryStart)
                    var text = "completion event waiting for delivery: no process held the session; the daemon relaunched \(r.1) \(String(format: "%.2f", after)) s after the task ended"
                    guard after > 1 else { return text }
                    text += " (the log does not say what held the relaunch back: the resume rate limiter, another task of the session still running, or the app's executable not yet known"
                    // The limiter spaces an app's relaunches (any session of it) by a delay that doubles each time.
                    if let previous = relaunches.values.joined().filter({ $0.1 == r.1 && $0.0 < r.0 }).map(\.0).max() {
                        text += "; the previous relaunch of \(r.1) was \(String(format: "%.1f", r.0.timeIntervalSince(previous))) s before this one, so most likely the rate limiter"
                    }
                    return text + ")"
                }
                    ?? "completion event waiting for delivery to the process holding the session"
                waits.append(TimelineWait(task: key, start: deliveryStart, end: deliveryEnd, kind: .delivery, reason: why))
            }
            if let acknowledgement {
                marks.append(TimelineMark(time: acknowledgement.0, kind: .acknowledged, lane: acknowledgement.1, task: key, label: "acknowledged", detail: acknowledgement.2))
                task.end = acknowledgement.0
                task.outcome = "\(task.outcome.isEmpty ? "completed" : task.outcome); delivered and acknowledged"
            } else if let stillPending {
                task.open = true
                let why = findingsForSession(key.session, snapshot: snapshot).joined(separator: "; ")
                let start = deliveredAt ?? relaunch?.0 ?? finishedAt
                waits.append(TimelineWait(task: key, start: start, end: now, kind: deliveredAt == nil ? .delivery : .unacknowledged, reason: "event \(stillPending.number) not yet acknowledged: \(why)", open: true))
                task.outcome = "\(task.outcome.isEmpty ? "completed" : task.outcome); event \(stillPending.number) not yet acknowledged"
            } else {
                task.end = max(deliveredAt ?? finishedAt, finishedAt)
                if task.outcome.isEmpty { task.outcome = "completed" }
            }
        } else if let stillPending {
            // Ended before the log began (or at a quieter level): only the journal knows.
            task.open = true
            waits.append(TimelineWait(task: key, start: task.start, end: now, kind: .delivery, reason: "event \(stillPending.number) not yet acknowledged: \(findingsForSession(key.session, snapshot: snapshot).joined(separator: "; "))", open: true))
            task.outcome = "completed; event \(stillPending.number) waiting for delivery"
        } else if let record = snapshotTasks[key] {
            task.open = true
            closeWait(at: now)
            if let hold = waitingNow[key] {
                let kind = TimelineWait.Kind(hold: hold)
                if let same = waits.firstIndex(where: { $0.kind == kind && $0.open }) {
                    waits[same].reason = "waiting now: \(hold)"
                } else {
                    let from = max(marks.last?.time ?? task.start, task.start)
                    waits.append(TimelineWait(task: key, start: from, end: now, kind: kind, reason: "waiting now: \(hold)", open: true))
                }
                task.outcome = "\(record.state.name), \(hold)"
            } else {
                task.outcome = record.state == .running ? "running (transferring, or next when a connection is free)" : record.state.name
            }
        } else {
            closeWait(at: marks.last?.time ?? task.start)
            task.end = max(marks.last?.time ?? task.start, task.start)
            task.outcome = "no end in the log (it may have ended before the log began)"
        }
        if !task.open, task.end < task.start { task.end = task.start }
        if let lastLogTime, !task.open, task.end > lastLogTime.addingTimeInterval(1), marks.isEmpty { task.end = lastLogTime }
        task.name = record?.taskDescription ?? (URL(string: task.url)?.lastPathComponent).flatMap { $0.isEmpty || $0 == "/" ? nil : $0 } ?? task.url
        if task.name.isEmpty { task.name = "(url unknown)" }
        return (task, marks, waits)
    }

    /// What keeps a session's events from its app now, as the daemon decides (`wantsRelaunch`).
    func findingsForSession(_ identifier: String, snapshot: ContainerSnapshot) -> [String] {
        guard let session = snapshot.sessions.first(where: { $0.identifier == identifier }) else { return ["the session's record is gone"] }
        let app = snapshot.apps.first { $0.bundleIdentifier == session.family }
        var reasons: [String] = ContainerSnapshot.deliveryHolds(holder: session.holderPID, configuration: session.configuration, tasks: session.tasks, app: app, now: now).map { hold in
            switch hold {
            case .heldBy(let pid): "pid \(pid) holds the session: the events go to it, nothing is relaunched while it does"
            case .noLaunchEvents: "sessionSendsLaunchEvents is off: the app is never woken for this session"
            case .forceQuit: "\(session.family) was force-quit by the user: no relaunch until the user launches it"
            case .tasksRunning(let running): "\(running) task\(running == 1 ? "" : "s") of the session still run\(running == 1 ? "s" : ""): the app is woken once they are done"
            case .rateLimiter(let last, let delay):
                "the resume rate limiter holds the next relaunch of \(session.family) until \(Self.clock(last.addingTimeInterval(delay))) (delay \(String(format: "%.1f", delay)) s after the relaunch at \(Self.clock(last)))"
            case .relaunchGivenUp(let failures): "\(session.family)'s last \(failures) relaunches failed: no relaunch until the user launches it"
            case .executableUnknown: "the daemon does not know \(session.family)'s executable yet (it learns it from a hello of the app or an extension)"
            }
        }
        // The daemon's own absence holds everything (after a holder, which gets the events anyway).
        if !snapshot.daemon.running { reasons.insert("transferd is not running: nothing is relaunched until a client starts it", at: session.holderPID == nil ? 0 : 1) }
        if reasons.isEmpty { reasons.append("nothing holds it back: the daemon should relaunch \(session.family) at its next turn") }
        return reasons
    }

    // MARK: Lanes

    static func laneID(_ process: String, _ pid: Int32) -> String { "\(process)-\(pid)" }

    private func keep(_ entries: [LogEntry]) -> [LogEntry] {
        guard let filter = sessionFilter else { return entries }
        let involved = Set(entries.filter { $0.session == filter }.map { Self.laneID($0.process, $0.pid) })
        return entries.filter { entry in
            if let session = entry.session { return session == filter }
            if involved.contains(Self.laneID(entry.process, entry.pid)) { return true }
            // A daemon's life matters to every session: its start, its end, the conditions.
            switch TimelineFact(entry) {
            case .daemonStarted, .daemonStopping, .conditions: return true
            default: return false
            }
        }
    }

    private func buildLanes(_ entries: [LogEntry], _ facts: [TimelineFact], snapshot: ContainerSnapshot) -> [TimelineLane] {
        var order: [String] = []
        var byID: [String: (first: LogEntry, last: LogEntry, facts: [(LogEntry, TimelineFact)])] = [:]
        var relaunched: [Int32: String] = [:] // pid → session
        var exited: [Int32: Date] = [:]
        var budgetKilled: [Int32: Date] = [:]
        for (entry, fact) in zip(entries, facts) {
            let id = Self.laneID(entry.process, entry.pid)
            if byID[id] == nil { order.append(id); byID[id] = (entry, entry, []) }
            byID[id]!.last = entry
            byID[id]!.facts.append((entry, fact))
            switch fact {
            case .relaunched(_, let pid): relaunched[pid] = entry.session ?? "?"
            case .relaunchedAppExited(let pid, _): exited[pid] = entry.time
            case .backgroundBudgetExceeded(let pid): budgetKilled[pid] = entry.time
            default: break
            }
        }
        // What the registry says an executable is (an adopter's names are not ours).
        var kinds: [String: String] = [:]
        for app in snapshot.apps { if let executable = app.executable { kinds[(executable as NSString).lastPathComponent] = app.kind } }
        var lanes: [TimelineLane] = []
        var incarnation = 0
        let daemonStarts = order.compactMap { byID[$0] }.filter { $0.first.process == "transferd" }.map(\.first.time)
        for id in order {
            let (first, last, laneFacts) = byID[id]!
            var lane = TimelineLane(id: id, process: first.process, pid: first.pid, kind: .tool, title: "", start: first.time, end: last.time, ending: "last line logged at \(Self.clock(last.time))")
            let launchedFor = laneFacts.first { $0.1 == .launchedForEvents }?.0.session ?? relaunched[first.pid]
            if first.process == "transferd" {
                incarnation += 1
                lane.kind = .daemon
                lane.title = "transferd [\(first.pid)] · daemon #\(incarnation)"
                if let stop = laneFacts.last(where: { if case .daemonStopping = $0.1 { return true } else { return false } }) {
                    lane.ending = "stopped (\(stop.0.message))"
                } else if snapshot.daemon.running && snapshot.daemon.pid == first.pid {
                    lane.ending = "running"
                    lane.stillRunning = true
                    lane.end = max(now, last.time)
                } else if daemonStarts.contains(where: { $0 > last.time }) || !snapshot.daemon.running {
                    lane.diedBy = daemonStarts.first { $0 > last.time }
                    lane.ending = "killed or crashed: no last word after its line at \(Self.clock(last.time))" + (lane.diedBy.map { ", gone before \(Self.clock($0))" } ?? "")
                    lane.endedAbruptly = true
                }
            } else if launchedFor != nil {
                lane.kind = .relaunchedApp
                lane.title = "\(first.process) [\(first.pid)] · relaunched"
                lane.ending = "for \(launchedFor!)"
            } else if kinds[first.process] == "extension" || (kinds[first.process] == nil && first.process.contains("extension")) {
                lane.kind = .appExtension
                lane.title = "\(first.process) [\(first.pid)] · extension"
            } else if first.process == "bgtransfer" || kinds[first.process] == "tool" {
                lane.kind = .tool
                lane.title = "\(first.process) [\(first.pid)] · tool"
            } else {
                lane.kind = .userLaunchedApp
                lane.title = "\(first.process) [\(first.pid)] · launched by the user"
            }
            if let killed = budgetKilled[first.pid], lane.kind == .relaunchedApp {
                lane.end = max(lane.end, killed)
                lane.ending = "killed by the daemon: no completion handler within its background budget (\(lane.ending))"
                lane.endedAbruptly = true
            } else if let gone = exited[first.pid], lane.kind == .relaunchedApp {
                lane.end = max(lane.end, gone)
                lane.ending = "exited · \(lane.ending)"
            }
            lanes.append(lane)
        }
        return lanes
    }

    static func shortCall(_ call: String) -> String {
        switch call {
        case "didCompleteWithError": "didComplete"
        case "didFinishDownloadingTo": "didFinishDownloading"
        case "urlSessionDidFinishEvents": "didFinishEvents"
        default: call
        }
    }

    /// A time of day with milliseconds, UTC.
    static func clock(_ date: Date) -> String {
        let text = ISO8601Format.string(from: date)
        guard let t = text.firstIndex(of: "T") else { return text }
        return String(text[text.index(after: t)...].prefix { $0 != "Z" && $0 != "+" }) + " UTC"
    }
}
