import Foundation
import TransferContainer
import ProgressDisplay
import ContainerInspection
import TransferCoding
import TransferLogging

/// Builds a `Timeline` from log entries, the sessions' journals and a snapshot of the
/// container: processes from the entries' process and pid, task facts from `TimelineFact`,
/// and what is still pending (tasks, events, the reasons they wait) from the journals.
struct TimelineBuilder {
    var layout: ContainerLayout
    var sessionFilter: String?
    var now = Date()

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

        // Lane marks (session-wide and process-wide facts), each with its line's place in the log.
        for (line, (entry, fact)) in zip(entries, facts).enumerated() {
            let made = timeline.marks.count
            defer { for index in made..<timeline.marks.count { timeline.marks[index].line = line } }
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
            case .wokenForEvents:
                timeline.marks.append(TimelineMark(time: entry.time, kind: .launched, lane: lane,
                                                   label: "woken for events", detail: "\(where_): \(entry.message)"))
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
        let waitingNow = Dictionary(sessions.flatMap { s in s.holds.compactMap { k, v in Int(k).map { (TimelineTaskKey(session: s.identifier, task: $0), v) } } }, uniquingKeysWith: { a, _ in a })
        let lastLogTime = entries.last?.time
        var factsByTask: [TimelineTaskKey: [(LogEntry, TimelineFact, Int)]] = [:]
        for (line, (entry, fact)) in zip(entries, facts).enumerated() {
            guard let session = entry.session, let task = entry.task else { continue }
            factsByTask[TimelineTaskKey(session: session, task: task), default: []].append((entry, fact, line))
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
