import Foundation
import TransferContainer

/// One background session as the daemon holds it: its record, its unfinished tasks and its
/// undelivered events, each mirrored durably on disk before anyone is told of a change.
/// Owned by the event loop.
///
/// On disk (`Sessions/<family>/<identifier>/`): `session.json`, `tasks/<id>.json`,
/// `events/<number>.json`. A task's record is removed only after the event that ends it is
/// written, so at every instant a task is either unfinished or has its completion event.
final class DaemonSession {
    let key: SessionKey
    let directory: URL
    private(set) var record: SessionRecord
    private(set) var tasks: [Int: TaskRecord] = [:]
    private(set) var events: [UInt64: EventRecord] = [:]
    /// The client holding the session now, if any.
    var holder: ClientConnection?
    /// Set by `finishTasksAndInvalidate`: invalidate once no task is left.
    var invalidateWhenDone = false
    /// Events already pushed to the current holder (not yet acknowledged).
    var pushedThrough: UInt64 = 0
    private let layout: ContainerLayout
    private let log: TransferLog

    private var tasksDirectory: URL { directory.appendingPathComponent("tasks") }
    private var eventsDirectory: URL { directory.appendingPathComponent("events") }
    private var recordPath: String { directory.appendingPathComponent("session.json").path }

    /// Where this session's partial and finished downloads go.
    var downloadsDirectory: URL {
        layout.downloadsDirectory(sharedContainer: record.configuration.sharedContainerIdentifier, owner: record.owner, identifier: key.identifier)
    }

    /// Creates a new session durably.
    init(layout: ContainerLayout, log: TransferLog, record: SessionRecord) throws {
        self.layout = layout
        self.log = log
        self.key = SessionKey(family: record.family, identifier: record.identifier)
        self.directory = layout.sessionDirectory(family: record.family, identifier: record.identifier)
        self.record = record
        try DurableFile.makeDirectory(tasksDirectory.path)
        try DurableFile.makeDirectory(eventsDirectory.path)
        try persistRecord()
    }

    /// Loads a session from disk. Unreadable task or event records are moved aside as
    /// `*.corrupt` and logged; the rest of the session loads.
    init(layout: ContainerLayout, log: TransferLog, loadingFrom directory: URL) throws {
        self.layout = layout
        self.log = log
        self.directory = directory
        let record = try RecordCoding.read(SessionRecord.self, from: directory.appendingPathComponent("session.json").path)
        guard record.version <= SessionRecord.currentVersion else {
            throw RecordError.unsupportedVersion(path: directory.appendingPathComponent("session.json").path, version: record.version)
        }
        self.record = record
        self.key = SessionKey(family: record.family, identifier: record.identifier)
        try DurableFile.makeDirectory(tasksDirectory.path)
        try DurableFile.makeDirectory(eventsDirectory.path)
        for (path, event) in loadRecords(EventRecord.self, in: eventsDirectory, version: EventRecord.currentVersion) {
            guard path.hasSuffix("/\(event.number).json") else { quarantine(path, reason: "name does not match event number \(event.number)"); continue }
            events[event.number] = event
        }
        let finished = Set(events.values.map(\.task.taskIdentifier))
        for (path, task) in loadRecords(TaskRecord.self, in: tasksDirectory, version: TaskRecord.currentVersion) {
            guard path.hasSuffix("/\(task.taskIdentifier).json") else { quarantine(path, reason: "name does not match task \(task.taskIdentifier)"); continue }
            if finished.contains(task.taskIdentifier) {
                // Killed between writing the completion event and removing the task: finish the removal.
                try? DurableFile.remove(path)
                continue
            }
            tasks[task.taskIdentifier] = task
        }
        // Numbers never go back, even if the records that used them are gone.
        let highestTask = max(tasks.keys.max() ?? 0, events.values.map(\.task.taskIdentifier).max() ?? 0)
        self.record.nextTaskIdentifier = max(record.nextTaskIdentifier, highestTask + 1)
        self.record.nextEventNumber = max(record.nextEventNumber, (events.keys.max() ?? 0) + 1)
    }

    private func loadRecords<T: Decodable & Sendable>(_ type: T.Type, in directory: URL, version: Int) -> [(String, T)] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var result: [(String, T)] = []
        for name in names where name.hasSuffix(".json") && !name.hasPrefix(".") {
            let path = directory.appendingPathComponent(name).path
            do {
                let value = try RecordCoding.read(T.self, from: path)
                if let versioned = value as? TaskRecord, versioned.version > version { throw RecordError.unsupportedVersion(path: path, version: versioned.version) }
                if let versioned = value as? EventRecord, versioned.version > version { throw RecordError.unsupportedVersion(path: path, version: versioned.version) }
                result.append((path, value))
            } catch {
                quarantine(path, reason: "\(error)")
            }
        }
        return result
    }

    /// Moves an unusable record aside (never deletes it: a person may want to look).
    private func quarantine(_ path: String, reason: String) {
        log.error("store", "skipping record \(path): \(reason); kept as \(path).corrupt", session: key.identifier.rawValue)
        rename(path, path + ".corrupt")
    }

    // MARK: Tasks

    var unfinishedTasks: [TaskRecord] { tasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier } }

    /// Creates a task, durable on return (before the client hears of it).
    func createTask(_ creation: TaskCreation, inBackground: Bool, pendingFailure: TransferFailure?) throws -> TaskRecord {
        var task = TaskRecord(taskIdentifier: record.nextTaskIdentifier, kind: creation.kind, originalRequest: creation.request)
        task.taskDescription = creation.taskDescription
        task.priority = creation.priority
        task.earliestBeginDate = creation.earliestBeginDate
        task.uploadFile = creation.uploadFile
        task.createdInBackground = inBackground
        task.requirements = creation.requirements
        task.pendingFailure = pendingFailure
        task.state = .suspended
        record.nextTaskIdentifier += 1
        try persist(task)
        tasks[task.taskIdentifier] = task
        return task
    }

    /// Writes a changed task durably.
    func update(_ task: TaskRecord) throws {
        let task = task.nextRevision(after: tasks[task.taskIdentifier])
        try persist(task)
        tasks[task.taskIdentifier] = task
    }

    /// Updates the in-memory task only (progress between checkpoints).
    func updateInMemory(_ task: TaskRecord) {
        tasks[task.taskIdentifier] = task
    }

    private func persist(_ task: TaskRecord) throws {
        try RecordCoding.write(task, to: tasksDirectory.appendingPathComponent("\(task.taskIdentifier).json").path)
    }

    /// Ends a task: writes its completion event, then removes its record. Returns the event.
    func complete(_ task: TaskRecord, downloadedFile: String?, error: TransferFailure?, responseBody: Data? = nil) throws -> EventRecord {
        var finished = task
        finished.state = .completed
        let event = EventRecord(number: record.nextEventNumber, kind: .taskCompleted, task: finished, downloadedFile: downloadedFile, error: error, responseBody: responseBody)
        try RecordCoding.write(event, to: eventsDirectory.appendingPathComponent("\(event.number).json").path)
        record.nextEventNumber += 1
        events[event.number] = event
        tasks.removeValue(forKey: task.taskIdentifier)
        try DurableFile.remove(tasksDirectory.appendingPathComponent("\(task.taskIdentifier).json").path)
        return event
    }

    // MARK: Events

    var pendingEvents: [EventRecord] { events.values.sorted { $0.number < $1.number } }

    /// Forgets every event up to `through` (the client handled them) and the finished files
    /// the client left behind.
    func acknowledge(through: UInt64) throws {
        let done = events.keys.filter { $0 <= through }
        guard !done.isEmpty else { return }
        // Keep the counters ahead of every number about to disappear from disk.
        try persistRecord()
        for number in done.sorted() {
            if let file = events[number]?.downloadedFile {
                unlink(file)
            }
            try DurableFile.remove(eventsDirectory.appendingPathComponent("\(number).json").path, syncDirectory: false)
            events.removeValue(forKey: number)
        }
        try DurableFile.syncDirectory(eventsDirectory.path)
    }

    // MARK: Record

    func updateConfiguration(_ configuration: SessionConfiguration) throws {
        guard configuration != record.configuration else { return }
        record.configuration = configuration
        try persistRecord()
    }

    func persistRecord() throws {
        try RecordCoding.write(record, to: recordPath)
    }
}
