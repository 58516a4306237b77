#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferCoding

/// Work in a container that needs its daemon: a task the daemon is to carry on (resumed and
/// not ended) or an event waiting for its app. What the daemon itself counts as busy (it does
/// not exit idle while it has some), so that a daemon started for it stays. A suspended task
/// is not such work: it waits for its app to resume it, with or without a daemon. A value.
public struct UnfinishedWork: Sendable, Equatable, CustomStringConvertible {
    /// The app family (containing app's bundle) and session identifier of the first session found.
    public var family: String
    public var session: String
    public var tasksToCarryOn: Int
    public var undeliveredEvents: Int

    public var description: String {
        "session \(session) of \(family): \(tasksToCarryOn) tasks to carry on, \(undeliveredEvents) undelivered events"
    }

    /// The first session of the container with work, or nil when none has any. Cheap for a
    /// container with nothing to do: one listing of `Sessions/` and of each app family, one
    /// `stat` per session; a journal is read only when it is not empty, and decoded only when
    /// it names a task or an event (a compacted journal of finished work holds counters only).
    public static func first(in layout: ContainerLayout) -> UnfinishedWork? {
        for family in names(in: layout.sessionsDirectory.path) {
            let familyPath = layout.sessionsDirectory.appendingPathComponent(family).path
            for session in names(in: familyPath) {
                let directory = URL(fileURLWithPath: familyPath).appendingPathComponent(session)
                if let work = work(inSession: directory, family: family, identifier: session) { return work }
            }
        }
        return nil
    }

    /// The work of the session in `directory`, or nil when it has none.
    static func work(inSession directory: URL, family: String, identifier: String) -> UnfinishedWork? {
        let path = JournalContents.path(inSession: directory)
        var status = stat()
        guard stat(path, &status) == 0, status.st_size > 0,
              let data = FileManager.default.contents(atPath: path),
              data.range(of: Data("\"task\"".utf8)) != nil || data.range(of: Data("\"event\"".utf8)) != nil
        else { return nil }
        let journal = JournalContents(parsing: data)
        let tasks = journal.tasks.values.filter { $0.state != .suspended }.count
        // Events wait for a launch only when the session asks for launches; otherwise for the
        // app to open the session, which brings a daemon anyway. An unreadable record counts.
        let recordPath = directory.appendingPathComponent("session.json").path
        let record = try? RecordCoding.read(SessionRecord.self, from: recordPath)
        let events = record?.configuration.sessionSendsLaunchEvents == false ? 0 : journal.events.count
        guard tasks > 0 || events > 0 else { return nil }
        return UnfinishedWork(family: family, session: identifier, tasksToCarryOn: tasks, undeliveredEvents: events)
    }

    private static func names(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted()
    }
}
