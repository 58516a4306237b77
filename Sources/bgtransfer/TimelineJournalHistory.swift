import Foundation
import TransferContainer
import TransferCoding

extension TimelineBuilder {
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
}
