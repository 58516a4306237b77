import Foundation
import TransferContainer
import TransferCoding
import TransferPOSIX

/// What `bgtransfer inspect` shows, read from the container alone (the daemon may be
/// stopped): the daemon, the apps, the sessions with their tasks and pending events, and the
/// files in each app group. Encoded as the stable JSON documented in the README.
public struct ContainerSnapshot: Codable, Sendable {
    public struct Daemon: Codable, Sendable {
        public var running: Bool
        public var pid: Int32?
    }

    public struct App: Codable, Sendable {
        public var bundleIdentifier: String
        public var kind: String
        public var containingApp: String
        public var executable: String?
        public var appGroups: [String]
        /// Force-quit by the user and not launched since: nothing is relaunched (S4.2).
        public var forceQuit: Bool
        /// The resume rate limiter's current delay between background relaunches, in
        /// seconds, and when the last one happened (S6.5); nil until the daemon relaunched it.
        public var relaunchDelay: Double?
        public var lastRelaunch: Date?
        /// Failed relaunches in a row (launches that could not start, launched processes
        /// that exited without opening their session), and whether the daemon gave up
        /// relaunching the app after them: its events then wait for the user to launch it.
        public var failedRelaunches = 0
        public var relaunchGivenUp = false
    }

    public struct PendingEvent: Codable, Sendable {
        public var number: UInt64
        public var kind: String
        public var taskIdentifier: Int
        public var url: String
        public var statusCode: Int?
        public var error: TransferFailure?
        public var downloadedFile: String?
    }

    public struct Session: Codable, Sendable {
        public var identifier: String
        public var family: String
        public var owner: String
        public var holderPID: Int32?
        public var configuration: SessionConfiguration
        public var tasks: [TaskRecord]
        /// What holds each waiting task back (by task identifier), as the daemon schedules by
        /// it: the typed value, and its words in `waiting` (for people and scripts).
        public var holds: [String: TaskHold]
        public var waiting: [String: String]
        public var pendingEvents: [PendingEvent]
        /// Why the pending events have not reached the app yet, and until when (nil: none wait).
        public var deliveryWait: String?
        /// Records that could not be read (kept on disk as they are).
        public var unreadableRecords: [String]
        /// The last process that opened the session had no delegate: the events it took were
        /// acknowledged without reaching one (S1.2; `SessionRecord.openedWithoutDelegate`).
        public var openedWithoutDelegate = false

        /// Every member, `holderPID` and `deliveryWait` as null when there are none: a stable
        /// shape for scripts.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(identifier, forKey: .identifier)
            try container.encode(family, forKey: .family)
            try container.encode(owner, forKey: .owner)
            try container.encode(holderPID, forKey: .holderPID)
            try container.encode(configuration, forKey: .configuration)
            try container.encode(tasks, forKey: .tasks)
            try container.encode(holds, forKey: .holds)
            try container.encode(waiting, forKey: .waiting)
            try container.encode(pendingEvents, forKey: .pendingEvents)
            try container.encode(deliveryWait, forKey: .deliveryWait)
            try container.encode(unreadableRecords, forKey: .unreadableRecords)
            try container.encode(openedWithoutDelegate, forKey: .openedWithoutDelegate)
        }

        /// Records what holds task `identifier` back, in both forms.
        public mutating func setHold(_ hold: TaskHold?, forTask identifier: Int) {
            holds[String(identifier)] = hold
            waiting[String(identifier)] = hold?.description
        }
    }

    public struct AppGroupFile: Codable, Sendable {
        public var path: String
        public var size: Int64
    }

    public struct AppGroup: Codable, Sendable {
        public var identifier: String
        public var files: [AppGroupFile]
    }

    public var version = 1
    public var container: String
    public var daemon: Daemon
    /// The simulated device conditions (`bgtransfer conditions`); the defaults when unreadable.
    public var conditions: DeviceConditions
    public var apps: [App]
    public var sessions: [Session]
    public var appGroups: [AppGroup]

    /// Reads the container; a `sessionFilter` keeps one session identifier.
    public static func read(_ layout: ContainerLayout, sessionFilter: String? = nil) -> ContainerSnapshot {
        let fm = FileManager.default
        let daemonRunning = FileLock.isHeld(layout.daemonLock.path)
        let daemon = Daemon(running: daemonRunning, pid: daemonRunning ? FileLock.holderPID(layout.daemonLock.path) : nil)

        let conditions = (try? DeviceConditions.load(from: layout)) ?? DeviceConditions()
        let now = Date()
        let apps = readApps(layout)

        var sessions: [Session] = []
        for family in sortedNames(layout.sessionsDirectory) {
            for identifier in sortedNames(layout.sessionsDirectory.appendingPathComponent(family)) {
                if let filter = sessionFilter, filter != identifier { continue }
                let directory = layout.sessionsDirectory.appendingPathComponent(family).appendingPathComponent(identifier)
                guard let record = try? RecordCoding.read(SessionRecord.self, from: directory.appendingPathComponent("session.json").path) else { continue }
                var unreadable: [String] = []
                var journal = JournalContents()
                do {
                    journal = try JournalContents.read(session: directory)
                    unreadable = journal.unreadable.map { "journal.jsonl line \($0.line)" }
                } catch {
                    unreadable = ["journal.jsonl"]
                }
                let tasks = journal.tasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier }.map { task in
                    var task = task
                    task.originalRequest = task.originalRequest.redacted
                    task.replacementRequest = task.replacementRequest?.redacted
                    task.uploadFile = task.uploadFile.map { layout.resolveRecordPath($0) ?? $0 } // shown absolute
                    return task
                }
                let events = journal.events.values.sorted { $0.number < $1.number }.map { event in
                    PendingEvent(number: event.number, kind: event.kind.rawValue, taskIdentifier: event.task.taskIdentifier, url: event.task.originalRequest.url, statusCode: event.task.response?.statusCode, error: event.error, downloadedFile: event.downloadedFile.map { layout.resolveRecordPath($0) ?? $0 })
                }
                var holds: [String: TaskHold] = [:]
                for task in tasks { holds[String(task.taskIdentifier)] = task.hold(under: conditions, now: now) }
                let lock = directory.appendingPathComponent("session.lock").path
                let holder = FileLock.isHeld(lock) ? FileLock.holderPID(lock) : nil
                let app = apps.first { $0.bundleIdentifier == family }
                let wait = events.isEmpty ? nil : deliveryHolds(holder: holder, configuration: record.configuration, tasks: tasks, app: app, now: now).first?.text(now: now)
                    ?? "the app is to be launched for them now"
                sessions.append(Session(identifier: identifier, family: family, owner: record.owner.rawValue, holderPID: holder, configuration: record.configuration,
                                        tasks: tasks, holds: holds, waiting: holds.mapValues(\.description), pendingEvents: events, deliveryWait: wait, unreadableRecords: unreadable))
                sessions[sessions.count - 1].openedWithoutDelegate = record.openedWithoutDelegate == true
            }
        }

        var groups: [AppGroup] = []
        let groupsDirectory = layout.root.appendingPathComponent("AppGroups")
        for group in sortedNames(groupsDirectory) {
            let base = groupsDirectory.appendingPathComponent(group)
            var files: [AppGroupFile] = []
            if let enumerator = fm.enumerator(atPath: base.path) {
                while let relative = enumerator.nextObject() as? String {
                    let attributes = try? fm.attributesOfItem(atPath: base.appendingPathComponent(relative).path)
                    guard attributes?[.type] as? FileAttributeType == .typeRegular else { continue }
                    files.append(AppGroupFile(path: relative, size: (attributes?[.size] as? NSNumber)?.int64Value ?? 0))
                }
            }
            groups.append(AppGroup(identifier: group, files: files.sorted { $0.path < $1.path }))
        }
        return ContainerSnapshot(container: layout.root.path, daemon: daemon, conditions: conditions, apps: apps, sessions: sessions, appGroups: groups)
    }

    /// The app registry (`Daemon/apps.json`) as `inspect` shows it; none when it cannot be read.
    private static func readApps(_ layout: ContainerLayout) -> [App] {
        var apps: [App] = []
        if let data = FileManager.default.contents(atPath: layout.appRegistry.path),
           let registry = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
           let entries = registry["apps"] as? [String: [String: Any]] {
            let forceQuit = Set(registry["forceQuit"] as? [String] ?? [])
            let limits = registry["relaunchLimits"] as? [String: [String: Any]] ?? [:]
            let failures = registry["relaunchFailures"] as? [String: [String: Any]] ?? [:]
            for (bundle, entry) in entries.sorted(by: { $0.key < $1.key }) {
                let identity = entry["identity"] as? [String: Any] ?? [:]
                let family = identity["containingApp"] as? String ?? bundle
                let limit = bundle == family ? limits[family] : nil
                apps.append(App(bundleIdentifier: bundle, kind: identity["kind"] as? String ?? "?",
                                containingApp: family, executable: entry["executablePath"] as? String,
                                appGroups: identity["appGroups"] as? [String] ?? [],
                                forceQuit: forceQuit.contains(family),
                                relaunchDelay: (limit?["delay"] as? NSNumber)?.doubleValue,
                                lastRelaunch: (limit?["lastLaunch"] as? String).flatMap(ISO8601Format.date(from:)),
                                failedRelaunches: (failures[family]?["failures"] as? NSNumber)?.intValue ?? 0,
                                relaunchGivenUp: failures[family]?["gaveUpAt"] is String))
            }
        }
        return apps
    }

    /// What keeps a session's pending events from its app now, as the daemon decides when to
    /// launch the app (S3.1, S4.2, S6.5): `inspect` and `demo` say the first, the timeline
    /// all of them.
    public enum DeliveryHold: Sendable, Equatable {
        case heldBy(pid: Int32)
        case noLaunchEvents
        case forceQuit
        case relaunchGivenUp(failures: Int)
        case tasksRunning(Int)
        case rateLimiter(lastLaunch: Date, delay: TimeInterval)
        case executableUnknown

        /// As `inspect` says it.
        public func text(now: Date) -> String {
            switch self {
            case .heldBy(let pid): "being delivered to the process holding the session (pid \(pid))"
            case .noLaunchEvents: "waiting for the app to open the session (sessionSendsLaunchEvents is false: it is not launched for them)"
            case .forceQuit: "waiting for the user to launch the app: it was force-quit, and is not launched for events until then"
            case .relaunchGivenUp(let failures): "waiting for the user to launch the app: its last \(failures) relaunches failed (it could not be started, or exited without opening the session), and it is not launched for events until then"
            case .tasksRunning(let running): "waiting for the session's \(running) running tasks to finish: the app is launched once, when all have"
            case .rateLimiter(let last, let delay):
                "waiting out the resume rate limiter: the app's next background launch is at \(ISO8601Format.string(from: last.addingTimeInterval(delay))) (in \(Int(last.addingTimeInterval(delay).timeIntervalSince(now).rounded(.up))) s; delay \(String(format: "%.0f", delay)) s, doubling with each launch)"
            case .executableUnknown: "waiting for the app's first launch: the daemon does not know its executable yet"
            }
        }
    }

    /// Every `DeliveryHold` of a session with pending events, in the order the daemon meets them.
    public static func deliveryHolds(holder: Int32?, configuration: SessionConfiguration, tasks: [TaskRecord], app: App?, now: Date) -> [DeliveryHold] {
        var holds: [DeliveryHold] = []
        if let holder { holds.append(.heldBy(pid: holder)) }
        if !configuration.sessionSendsLaunchEvents { holds.append(.noLaunchEvents) }
        if app?.forceQuit == true { holds.append(.forceQuit) }
        if let app, app.relaunchGivenUp { holds.append(.relaunchGivenUp(failures: app.failedRelaunches)) }
        let running = tasks.filter { $0.state == .running }.count
        if running > 0 { holds.append(.tasksRunning(running)) }
        if let delay = app?.relaunchDelay, let last = app?.lastRelaunch, now < last.addingTimeInterval(delay) { holds.append(.rateLimiter(lastLaunch: last, delay: delay)) }
        if app?.executable == nil { holds.append(.executableUnknown) }
        return holds
    }

    private static func sortedNames(_ directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }
}
