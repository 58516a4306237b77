import Foundation
import TransferContainer
import TransferCoding
import TransferLogging
import TransferPOSIX
import TransferTransport

/// One background session as the daemon holds it: its record, its unfinished tasks and its
/// undelivered events, each change appended to the session's journal. Owned by the event loop.
///
/// On disk (`Sessions/<family>/<identifier>/`): `session.json` (owner, configuration) and
/// `journal.jsonl` (tasks and events, one JSON line per change). The daemon takes each
/// session's changes at the end of a turn of its loop and makes them durable on its commit
/// thread; replies and pushes wait for that, so no one hears of a change that is not on disk. A
/// task ends with the line of the event that ends it, so at every instant a task is either
/// unfinished or has its completion event. A finished download takes its final name
/// (`finishedPath`) only once its event is on disk: a file under that name is always described
/// by a durable event, never by a task record older than the answer the file holds.
final class DaemonSession {
    let key: SessionKey
    let directory: URL
    private(set) var record: SessionRecord
    private(set) var tasks: [Int: TaskRecord] = [:]
    /// Of `tasks`, those running and those a challenge holds, kept with every change.
    private(set) var runningCounts = RunningTaskCounts()
    private(set) var events: [UInt64: EventRecord] = [:]
    /// The client holding the session now, if any.
    var holder: ClientConnection?
    /// Set by `finishTasksAndInvalidate`: invalidate once no task is left.
    var invalidateWhenDone = false
    /// Events already pushed to the current holder (not yet acknowledged).
    var pushedThrough: UInt64 = 0
    /// The current holder has not yet been told that its backlog is through (`EventDelivery`).
    var owesBacklogWord = false
    /// The current holder was launched for the session's events: events pushed to it after
    /// its backlog word form a new batch, which ends with a word of its own (S3.2).
    var holderLaunchedForEvents = false
    /// The current holder has been told once that its backlog is through.
    var holderHeardBacklogWord = false
    private let layout: ContainerLayout
    private let log: TransferLog
    /// The container's root, through which `session.json` is read and written (nil in unit tests).
    private let root: RootDirectory?
    private let journal: SessionJournal
    private var counters: JournalCounters
    /// Tasks created or changed since the last commit, in the order first changed. Each is
    /// written once, as it is at the commit: a task created and resumed in one turn takes one
    /// line, and none if its completion event came in the same turn (the event carries it).
    private var changedTasks: [Int] = []
    private var isChanged: Set<Int> = []
    /// Finished files and folders to make durable before the journal lines that name them.
    private var filesToSync: [(FileDescriptor, path: String)] = []
    private var directoriesToSync: Set<String> = []
    /// Files no record will name once the lines that say so are on disk: finished files the
    /// client left behind (the acknowledgement), an ended task's partial data and upload body.
    private var filesToRemove: [String] = []
    /// Finished downloads' bodies, to take their final names once their events are on disk
    /// (before the events are pushed).
    private var filesToRename: [FileRename] = []
    /// Events ended while a holder was attached, as their journal lines encoded them, until
    /// they are pushed: the push reuses the bytes.
    private var encodedEvents: [UInt64: EncodedEvent] = [:]

    private var recordPath: String { directory.appendingPathComponent("session.json").path }

    /// The cookie store its transfers use, with the settings and owner it was made for
    /// (`TransferDaemon.cookieJar(for:)`).
    var cookieJar: (settings: CookieSettings, owner: BundleIdentifier, jar: CookieJar)?

    /// The folder of this session's partial and finished downloads, worked out once: its owner
    /// and app group never change, and the daemon names files in it for every task.
    private(set) lazy var downloadsDirectory: String =
        layout.downloadsDirectory(sharedContainer: record.configuration.sharedContainerIdentifier, owner: record.owner, identifier: key.identifier).path

    /// The path of a file in `downloadsDirectory`.
    func downloadsPath(_ name: String) -> String {
        downloadsDirectory + "/" + name
    }

    /// Creates a session durably. A journal its folder already holds (the session's record
    /// could not be read, and an opening process takes the session up again: see
    /// `SessionRecovery.takeUpSessionLeftInFolder`) is kept: its unfinished tasks and
    /// undelivered events go on, and its numbers continue after the old ones, never reused.
    init(layout: ContainerLayout, log: TransferLog, record: SessionRecord, root: RootDirectory? = nil) throws {
        self.layout = layout
        self.log = log
        self.root = root
        self.key = SessionKey(family: record.family, identifier: record.identifier)
        let directory = layout.sessionDirectory(family: record.family, identifier: record.identifier)
        self.directory = directory
        try Self.makeFolder(directory.path, root: root)
        let (contents, _) = try Self.readJournal(in: directory, layout: layout, log: log, session: record.identifier.rawValue, counting: record)
        var record = record
        record.nextTaskIdentifier = contents.counters.nextTaskIdentifier
        record.nextEventNumber = contents.counters.nextEventNumber
        self.record = record
        try Self.writeRecord(record, to: directory.appendingPathComponent("session.json").path, root: root)
        self.journal = try SessionJournal(path: JournalContents.path(inSession: directory), contents: contents)
        self.tasks = contents.tasks
        self.runningCounts = RunningTaskCounts(contents.tasks.values)
        self.events = contents.events
        self.counters = contents.counters
        if contents.lineCount > 0 { try compact() } // the counters first: numbers never go back
        if let root { nameFinishedDownloads(root: root, log: log) }
    }

    /// Loads a session from disk. Unusable journal lines are copied to `journal.corrupt` and
    /// logged, and the journal is rewritten without them; the rest of the session loads.
    init(layout: ContainerLayout, log: TransferLog, loadingFrom directory: URL, root: RootDirectory? = nil) throws {
        self.layout = layout
        self.log = log
        self.root = root
        self.directory = directory
        let recordPath = directory.appendingPathComponent("session.json").path
        let record = try Self.readRecord(at: recordPath, root: root)
        guard record.version <= SessionRecord.currentVersion else {
            throw RecordError.unsupportedVersion(path: recordPath, version: record.version)
        }
        self.record = record
        self.key = SessionKey(family: record.family, identifier: record.identifier)
        let (contents, rewrite) = try Self.readJournal(in: directory, layout: layout, log: log, session: record.identifier.rawValue, counting: record)
        self.journal = try SessionJournal(path: JournalContents.path(inSession: directory), contents: contents)
        self.tasks = contents.tasks
        self.runningCounts = RunningTaskCounts(contents.tasks.values)
        self.events = contents.events
        self.counters = contents.counters
        if rewrite || isStale { try compact() }
        if let root { nameFinishedDownloads(root: root, log: log) }
    }

    /// Reads the journal in `directory` (a missing one is empty). A torn last line is
    /// logged (and cut off when the journal is opened); unusable lines are copied to
    /// `journal.corrupt` and logged; paths in records written before paths were relative
    /// become relative. The counters are raised past `record`'s and past the last event the
    /// holding process says its delegate saw (`delivered.json`), so that no new event can
    /// look delivered already. `rewrite`: the journal no longer says what the file does.
    static func readJournal(in directory: URL, layout: ContainerLayout, log: TransferLog, session: String, counting record: SessionRecord) throws -> (contents: JournalContents, rewrite: Bool) {
        let path = JournalContents.path(inSession: directory)
        var contents = try JournalContents.read(path)
        if contents.hasTornTail {
            log.notice("store", "\(path): cut off a torn last line of \(contents.tornTailLength) bytes (a write the daemon never confirmed)", session: session)
        }
        var rewrite = !contents.unreadable.isEmpty
        if rewrite {
            var kept = Data()
            for (index, line) in contents.unreadable.enumerated() {
                // The first few are named one by one; a journal of thousands of bad lines
                // must not make the daemon's start a matter of logging.
                if index < 10 {
                    log.error("store", "\(path) line \(line.line) cannot be used: \(line.reason); kept in journal.corrupt", session: session)
                } else if index == 10 {
                    log.error("store", "\(path): \(contents.unreadable.count - 10) more lines cannot be used; kept in journal.corrupt", session: session)
                }
                kept.append(line.text)
                kept.append(UInt8(ascii: "\n"))
            }
            Self.appendQuietly(kept, to: directory.appendingPathComponent("journal.corrupt").path)
        }
        if relativizePaths(&contents, layout: layout, log: log, session: session) { rewrite = true }
        // The record's lower bounds count only when they are numbers a session can use.
        contents.counters.nextTaskIdentifier = max(contents.counters.nextTaskIdentifier, CheckedNumbers.clamp(record.nextTaskIdentifier, to: 1...CheckedNumbers.taskIdentifiers.upperBound))
        contents.counters.nextEventNumber = max(contents.counters.nextEventNumber, CheckedNumbers.clamp(record.nextEventNumber, to: 1...CheckedNumbers.eventNumbers.upperBound))
        // A number far beyond any a session reaches is not believed (the file is the client's).
        if let seen = (try? RecordCoding.read(DeliveredEvents.self, from: directory.appendingPathComponent("delivered.json").path))?.deliveredThrough,
           seen < 1 << 48, seen >= contents.counters.nextEventNumber {
            log.notice("store", "the session's process saw events up to \(seen), past the journal's last (\(contents.counters.nextEventNumber - 1)); new events are numbered from \(seen + 1)", session: session)
            contents.counters.nextEventNumber = seen + 1
        }
        return (contents, rewrite)
    }

    /// What the daemon reads of `delivered.json` (written by the holding process).
    private struct DeliveredEvents: Decodable {
        var deliveredThrough: UInt64
    }

    /// Records written before paths were relative name files by absolute path: those inside
    /// this container become relative; those outside it are refused and logged (a finished
    /// download's event then fails with -3001 instead of naming the file, an upload loses its
    /// body and fails with -1100 when it starts). Returns whether anything changed.
    private static func relativizePaths(_ contents: inout JournalContents, layout: ContainerLayout, log: TransferLog, session: String) -> Bool {
        var changed = false
        for (number, var event) in contents.events {
            guard let stored = event.downloadedFile, !(ContainerLayout.isRelativeRecordPath(stored) && layout.resolveRecordPath(stored) != nil) else { continue }
            if layout.resolveRecordPath(stored) != nil {
                event.downloadedFile = layout.recordPath(stored)
            } else {
                log.error("store", "event \(number): its finished file \(stored) lies outside the container \(layout.root.path); refused", session: session, task: event.task.taskIdentifier)
                event.downloadedFile = nil
                event.error = TransferFailure(code: TransferFailure.cannotOpenFile, message: "the finished file \(stored) lies outside the container; refused", subject: stored)
            }
            contents.events[number] = event
            changed = true
        }
        for (identifier, var task) in contents.tasks {
            guard let stored = task.uploadFile, !(ContainerLayout.isRelativeRecordPath(stored) && layout.resolveRecordPath(stored) != nil) else { continue }
            if layout.resolveRecordPath(stored) != nil {
                task.uploadFile = layout.recordPath(stored)
            } else {
                log.error("store", "task \(identifier): its upload body \(stored) lies outside the container \(layout.root.path); refused", session: session, task: identifier)
                task.uploadFile = nil
            }
            contents.tasks[identifier] = task
            changed = true
        }
        return changed
    }

    private static func appendQuietly(_ data: Data, to path: String) {
        guard let fd = try? FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND) else { return }
        try? fd.writeAll(data)
        try? fd.sync()
        fd.close()
    }

    // MARK: Tasks

    var unfinishedTasks: [TaskRecord] { tasks.keys.sorted().compactMap { tasks[$0] } } // numbers sort cheaper than records

    /// The identifier the next task gets.
    var nextTaskIdentifier: Int { counters.nextTaskIdentifier }

    /// Creates a task, with the identifier the holder chose if it did; durable at the next
    /// commit (before the client hears of it). An identifier may not be used twice.
    func createTask(_ creation: TaskCreation, inBackground: Bool, pendingFailure: TransferFailure?, at now: Date) throws -> TaskRecord {
        let identifier = creation.taskIdentifier ?? counters.nextTaskIdentifier
        guard CheckedNumbers.taskIdentifiers.contains(identifier) else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "task identifier \(identifier) is outside \(CheckedNumbers.taskIdentifiers) (session \(key.identifier))", subject: key.identifier.rawValue)
        }
        guard identifier >= counters.nextTaskIdentifier else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "task identifier \(identifier) was already used in session \(key.identifier)", subject: key.identifier.rawValue)
        }
        var task = TaskRecord(taskIdentifier: identifier, creation: creation, createdAt: now)
        task.createdInBackground = inBackground
        task.pendingFailure = pendingFailure
        counters.nextTaskIdentifier = identifier + 1
        runningCounts.add(task)
        tasks[task.taskIdentifier] = task
        noteChanged(identifier)
        return task
    }

    /// The task or, if it has ended, how it ended: for a creation sent again.
    func taskOrEnding(_ identifier: Int) -> TaskRecord? {
        tasks[identifier] ?? events.values.first { $0.task.taskIdentifier == identifier }?.task
    }

    /// Records a changed task; durable at the next commit. Its upload body is kept as a path
    /// relative to the container (`resolvedPath` gives it back).
    func update(_ task: TaskRecord) {
        var task = task
        if let file = task.uploadFile { task.uploadFile = layout.recordPath(file) }
        let previous = tasks[task.taskIdentifier]
        runningCounts.remove(previous)
        task = task.nextRevision(after: previous)
        runningCounts.add(task)
        tasks[task.taskIdentifier] = task
        noteChanged(task.taskIdentifier)
    }

    private func noteChanged(_ identifier: Int) {
        if isChanged.insert(identifier).inserted { changedTasks.append(identifier) }
    }

    /// Updates the in-memory task only (progress between checkpoints).
    func updateInMemory(_ task: TaskRecord) {
        runningCounts.remove(tasks[task.taskIdentifier])
        runningCounts.add(task)
        tasks[task.taskIdentifier] = task
    }

    /// Ends a task with its completion event, which takes the task's place. Returns the event,
    /// which names `downloadedFile` (absolute) relative to the container: the body, at
    /// `bodyPath(ofFinished:)` until then, takes that name once the event is on disk.
    func complete(_ task: TaskRecord, downloadedFile: String?, error: TransferFailure?, responseBody: Data? = nil, at now: Date) throws -> EventRecord {
        guard CheckedNumbers.eventNumbers.contains(counters.nextEventNumber) else {
            throw TransferFailure(code: TransferFailure.unknown, message: "session \(key.identifier) has used every event number", subject: key.identifier.rawValue)
        }
        let (finished, leftOut) = task.forEvent()
        var event = EventRecord(number: counters.nextEventNumber, kind: .taskCompleted, createdAt: now,
                                task: finished, downloadedFile: downloadedFile.map(layout.recordPath),
                                error: error, responseBody: responseBody)
        if leftOut { event.requestHeadersLeftOut = true }
        let encoded = try EncodedEvent(event)
        journal.append(encodedLine: encoded.journalLine)
        if holder != nil { encodedEvents[event.number] = encoded } // about to be pushed
        counters.nextEventNumber += 1
        events[event.number] = event
        runningCounts.remove(tasks.removeValue(forKey: task.taskIdentifier))
        if let downloadedFile {
            // The body's working name, given when the download began, is on disk before the line.
            directoriesToSync.insert(PathText.folder(of: downloadedFile))
            filesToRename.append(FileRename(from: bodyPath(ofFinished: finished), to: downloadedFile))
        }
        return event
    }

    /// Makes `file` durable (then closes it) before the next commit's lines, which name it.
    func syncBeforeCommit(_ file: FileDescriptor, path: String) {
        filesToSync.append((file, path))
    }

    /// The absolute path of a file a record of this session names (relative to the container,
    /// or absolute inside it); nil for one outside the container, which is never used.
    func resolvedPath(_ stored: String) -> String? {
        layout.resolveRecordPath(stored)
    }

    /// Makes the names in `directory` durable before the next commit's lines, which name them.
    func syncBeforeCommit(directory: String) {
        directoriesToSync.insert(directory)
    }

    // MARK: Events

    var pendingEvents: [EventRecord] { events.values.sorted { $0.number < $1.number } }

    /// The events numbered after `number`, in order: the newest few without sorting them all.
    func events(after number: UInt64) -> [EventRecord] {
        guard number < counters.nextEventNumber else { return [] }
        if counters.nextEventNumber - number - 1 <= UInt64(events.count) {
            return ((number + 1)..<counters.nextEventNumber).compactMap { events[$0] }
        }
        return pendingEvents.filter { $0.number > number }
    }

    /// The event's encoding from its journal line, once, if it is still at hand.
    func takeEncodedEvent(_ number: UInt64) -> EncodedEvent? {
        encodedEvents.removeValue(forKey: number)
    }

    /// Forgets every event up to `through` (the client handled them) and, once that is
    /// durable, the finished files the client left behind.
    func acknowledge(through: UInt64) throws {
        // Only events that exist can be acknowledged: a number past the last would be
        // written to the journal and skip events not yet made.
        guard through < counters.nextEventNumber else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "cannot acknowledge events through \(through): the last event of session \(key.identifier) is \(counters.nextEventNumber - 1)", subject: key.identifier.rawValue)
        }
        let done = events.keys.filter { $0 <= through }
        guard !done.isEmpty else { return }
        try journal.append(.acknowledged(through: through))
        for number in done {
            if let file = events.removeValue(forKey: number)?.downloadedFile, let path = resolvedPath(file) { filesToRemove.append(path) }
        }
        for number in done { encodedEvents.removeValue(forKey: number) }
    }

    /// Removes `files` once the next commit's lines are on disk: files of a task that has
    /// just ended, which the journal a power cut could leave would still name.
    func removeAfterCommit(_ files: [String]) {
        filesToRemove += files
    }

    // MARK: Commit

    /// Past this many lines a journal is rewritten when most of its lines are stale.
    static let compactionFloor = 4096

    /// Most of the journal's lines are stale: rewriting it pays. A journal of one line a task
    /// (as a compaction leaves it) is not, however long: at start-up, rewriting 100,000 live
    /// tasks cost more than reading them.
    private var isStale: Bool {
        journal.lineCount > Self.compactionFloor && journal.lineCount > 4 * (tasks.count + events.count + 1)
    }

    var needsCommit: Bool {
        journal.hasPending || journal.needsReplacement || !changedTasks.isEmpty || !filesToSync.isEmpty || !directoriesToSync.isEmpty || !filesToRemove.isEmpty || !filesToRename.isEmpty
    }

    /// Takes every change since the last commit for the commit thread (see `SessionCommit`):
    /// finished files and their folders, then the journal lines, or the whole journal again
    /// when most of its lines are stale. Nil when nothing changed. Give the commit back with
    /// `committed` or `commitFailed`; take no other until then.
    func takeCommit() throws -> SessionCommit? {
        guard needsCommit else { return nil }
        for identifier in changedTasks {
            guard let task = tasks[identifier] else { continue } // ended: its event says how
            try journal.append(.task(task))
        }
        changedTasks.removeAll()
        isChanged.removeAll()
        let write = journal.needsReplacement || isStale ? try journal.replacement(compactedLines) : journal.takeWrite()
        defer {
            filesToSync.removeAll()
            directoriesToSync.removeAll()
            filesToRemove.removeAll()
            filesToRename.removeAll()
        }
        return SessionCommit(session: key, files: filesToSync, directories: directoriesToSync, journal: write, filesToRename: filesToRename, filesToRemove: filesToRemove)
    }

    /// Notes a commit from `takeCommit` as durable.
    func committed(_ commit: SessionCommit) {
        if let write = commit.journal { journal.didWrite(write) }
    }

    /// Takes a failed commit back, so that the next one makes its changes durable. Its
    /// files were synced (or the failure logged) and closed; its folders and lines are tried
    /// again, and the files the client left behind stay until an acknowledgement is durable,
    /// as finished downloads keep their working names until their events are.
    func commitFailed(_ commit: SessionCommit) {
        if let write = commit.journal { journal.writeFailed(write) }
        directoriesToSync.formUnion(commit.directories)
        filesToRemove = commit.filesToRemove + filesToRemove
        filesToRename = commit.filesToRename + filesToRename
    }

    /// Renames a commit could not make once its lines were on disk: made with the next one.
    func renameAgain(_ renames: [FileRename]) {
        filesToRename = renames + filesToRename
    }

    /// The fewest lines that say what the journal says.
    private var compactedLines: [JournalLine] {
        var contents = JournalContents()
        contents.tasks = tasks
        contents.events = events
        contents.counters = counters
        return contents.compacted
    }

    /// Rewrites the journal as the fewest lines that say the same, now.
    private func compact() throws {
        try journal.rewrite(compactedLines)
    }

    // MARK: Record

    /// Keeps a server key the app accepted (S3.6) in the record, durably, before any transfer
    /// relies on it. Should the write fail, it is trusted still, for this daemon's life.
    func acceptServerKey(_ key: AcceptedServerKey) throws {
        record.acceptedServerKeys = AcceptedServerKey.adding(key, to: record.acceptedServerKeys ?? [])
        try Self.writeRecord(record, to: recordPath, root: root)
    }

    /// Whether the process that opened the session last has no delegate; written when it changes.
    func noteOpened(withoutDelegate: Bool) throws {
        let value: Bool? = withoutDelegate ? true : nil
        guard value != record.openedWithoutDelegate else { return }
        record.openedWithoutDelegate = value
        try Self.writeRecord(record, to: recordPath, root: root)
    }

    func updateConfiguration(_ configuration: SessionConfiguration) throws {
        guard configuration != record.configuration else { return }
        record.configuration = configuration
        try Self.writeRecord(record, to: recordPath, root: root)
    }
}
