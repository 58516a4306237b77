import Foundation
import ProgressDisplay
import ContainerInspection
import TransferLogging

/// How the timeline finds its lanes: one per process the log names. Runs on the main thread, as the builder does.
extension TimelineBuilder {
    func buildLanes(_ entries: [LogEntry], _ facts: [TimelineFact], snapshot: ContainerSnapshot) -> [TimelineLane] {
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
}
