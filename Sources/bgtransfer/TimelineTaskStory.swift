import Foundation
import TransferContainer
import ProgressDisplay
import ContainerInspection
import TransferLogging

/// How the timeline tells one task's story: its bar, marks and waits. Runs on the main thread, as the builder does.
extension TimelineBuilder {
    /// What the whole log and the journals say, gathered once, for telling each task's story.
    struct Sources {
        var history: JournalHistory
        var snapshot: ContainerSnapshot
        /// Each task's lines, with their places in the log (`TimelineMark.line`).
        var factsByTask: [TimelineTaskKey: [(LogEntry, TimelineFact, Int)]]
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
        var waitingNow: [TimelineTaskKey: TaskHold]
        var lastLogTime: Date?
    }

    /// One task's bar, marks and waits: its own log lines in order, the daemon deaths it lived
    /// through, what its journal records say, and its completion event until acknowledged.
    func story(of key: TimelineTaskKey, _ sources: Sources) -> (TimelineTask, [TimelineMark], [TimelineWait]) {
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
        for (entry, fact, line) in mine {
            let lane = laneID(entry)
            let where_ = "\(entry.process) [\(entry.pid)]"
            func mark(_ kind: TimelineMark.Kind, _ label: String) {
                marks.append(TimelineMark(time: entry.time, kind: kind, lane: lane, task: key, label: label,
                                          detail: "\(where_): \(entry.message)", line: line))
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
            case .retry(let attempt, let until, let cause):
                mark(.retry, "retry \(attempt)")
                let why = cause.isServerRequest ? "the server asked to come back later (Retry-After)" : "backoff"
                waits.append(TimelineWait(task: key, start: entry.time, end: max(entry.time, until), kind: cause.isServerRequest ? .retryAfter : .backoff,
                                          reason: "\(why): retry \(attempt) in \(String(format: "%.2f", max(0, until.timeIntervalSince(entry.time)))) s after: \(cause)"))
            case .waitingForSlot(let holders):
                if openWait == nil { openWait = (entry.time, .slot, TaskHold.waitingForSlot(behind: holders).description) }
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
}
