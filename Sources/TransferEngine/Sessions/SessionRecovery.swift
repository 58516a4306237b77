internal import Glibc
import Foundation
import TransferContainer
import TransferCoding
import TransferPOSIX
import TransferLogging
import TransferTransport

/// What session recovery sees of the daemon: the table of sessions it holds, which it fills
/// at start and adds a session taken up to. `TransferDaemon` answers, on the loop thread.
protocol SessionRecoverySurroundings: AnyObject {
    var sessions: [SessionKey: DaemonSession] { get set }
}

/// Sessions the daemon does not hold although their folder exists: their record could not be
/// used when the daemon started (corrupt, written by a newer daemon, naming another session),
/// or is gone beside its journal. Skipped at start (no owner, no configuration to go on
/// with), such a session is taken up again when a process of its app opens its identifier.
/// Also where the daemon finds the sessions at start. Owned by the daemon's loop thread.
final class SessionRecovery {
    /// Where the sessions found or taken up go.
    private unowned let surroundings: any SessionRecoverySurroundings
    private let layout: ContainerLayout
    private let log: TransferLog
    private let root: RootDirectory
    private let clock: any TimeSource
    /// The apps known: an app may take up its extensions' files too.
    private let registry: AppRegistry

    init(surroundings: any SessionRecoverySurroundings, layout: ContainerLayout, log: TransferLog, root: RootDirectory, clock: any TimeSource, registry: AppRegistry) {
        self.surroundings = surroundings
        self.layout = layout
        self.log = log
        self.root = root
        self.clock = clock
        self.registry = registry
    }

    /// Loads every session the container's `Sessions/` holds, skipping (and saying so) those
    /// whose folder cannot be used now.
    func loadSessions() {
        let fm = FileManager.default
        let families = (try? fm.contentsOfDirectory(atPath: layout.sessionsDirectory.path)) ?? []
        for family in families where !family.hasPrefix(".") {
            let familyDirectory = layout.sessionsDirectory.appendingPathComponent(family)
            for identifier in (try? fm.contentsOfDirectory(atPath: familyDirectory.path)) ?? [] where !identifier.hasPrefix(".") {
                let directory = familyDirectory.appendingPathComponent(identifier)
                guard fm.fileExists(atPath: directory.appendingPathComponent("session.json").path) else {
                    // A folder the client made for a session the daemon never created holds no journal either.
                    if let size = (try? fm.attributesOfItem(atPath: JournalContents.path(inSession: directory)))?[.size] as? NSNumber, size.intValue > 0 {
                        log.error("store", "session folder \(directory.path) has a journal but no session.json; skipped, files kept (taken up again when a process of its app opens it)")
                    }
                    continue
                }
                do {
                    let session = try DaemonSession(layout: layout, log: log, loadingFrom: directory, root: root)
                    guard session.key.family.rawValue == family, session.key.identifier.rawValue == identifier else {
                        log.error("store", "session record in \(directory.path) names \(session.key); skipped")
                        continue
                    }
                    surroundings.sessions[session.key] = session
                } catch {
                    log.error("store", "cannot load session in \(directory.path): \(error); skipped, files kept (taken up again when a process of its app opens it)")
                }
            }
        }
    }


    /// Called by `open` when the daemon holds no session for `key`: sets `sessions[key]` when
    /// the folder holds what is left of one, else leaves it to `open` to make a new session.
    ///
    /// A readable record of this session (the daemon could not load it at start for another
    /// reason) is loaded as at start. Otherwise the journal is kept — unfinished tasks,
    /// undelivered events, counters: numbers go on after the old ones, so no new task or
    /// event reuses a number and no new event looks delivered already — and a fresh
    /// `session.json` is written from the opening process's configuration, with that process
    /// as owner; the unusable record is kept as `session.json.unreadable`. Only a process of
    /// the session's app family reaches its folder (`Sessions/<family>/`), and it must be
    /// entitled to every container the journal's files lie in.
    func takeUpSessionLeftInFolder(_ key: SessionKey, _ configuration: SessionConfiguration, for identity: AppIdentity) throws {
        let directory = layout.sessionDirectory(family: key.family, identifier: key.identifier)
        let recordPath = directory.appendingPathComponent("session.json").path
        let journalPath = JournalContents.path(inSession: directory)
        let name = key.identifier.rawValue
        var st = stat()
        let hasRecord = access(recordPath, F_OK) == 0
        let hasJournal = stat(journalPath, &st) == 0 && st.st_size > 0
        guard hasRecord || hasJournal else { return } // a new session

        var problem: String?
        if !hasRecord {
            problem = "session.json is missing beside its journal"
        } else {
            do {
                let record = try RecordCoding.read(SessionRecord.self, from: recordPath)
                if record.version > SessionRecord.currentVersion {
                    problem = "session.json was written by a newer daemon (version \(record.version))"
                } else if record.family != key.family || record.identifier != key.identifier {
                    problem = "session.json names session \(record.family)/\(record.identifier)"
                }
            } catch {
                problem = "session.json cannot be read: \(error)"
            }
        }
        guard let problem else {
            do {
                surroundings.sessions[key] = try DaemonSession(layout: layout, log: log, loadingFrom: directory, root: root)
            } catch {
                log.error("store", "cannot load the session in \(directory.path) for \(identity.bundleIdentifier): \(error)", session: name)
                throw TransferFailure(code: TransferFailure.cannotOpenFile, message: "cannot load background session \(name): \(error)", subject: name)
            }
            log.notice("store", "loaded the session as \(identity.bundleIdentifier) opened it (it could not be loaded when the daemon started)", session: name)
            return
        }

        let left: JournalContents
        do { left = try JournalContents.read(journalPath) } catch {
            log.error("store", "\(problem), and its journal cannot be read: \(error); the session cannot be taken up", session: name)
            throw TransferFailure(code: TransferFailure.cannotOpenFile, message: "cannot take up background session \(name): \(problem), and its journal cannot be read: \(error)", subject: name)
        }
        let foreign = filesOutsideContainers(of: identity, in: left)
        guard foreign.isEmpty else {
            let message = "background session \(name) (\(problem)) holds files \(identity.bundleIdentifier) may not use: \(foreign.prefix(3).joined(separator: ", ")); only a process entitled to them may take it up"
            log.error("store", "refused to \(identity.bundleIdentifier): \(message)", session: name)
            throw TransferFailure(code: TransferFailure.requestRefused, message: message, subject: name)
        }
        if hasRecord, let unusable = FileManager.default.contents(atPath: recordPath) {
            do { try DurableFile.write(unusable, to: directory.appendingPathComponent("session.json.unreadable").path) } catch {
                log.error("store", "cannot keep the unusable session.json aside: \(error)", session: name)
            }
        }
        let record = SessionRecord(identifier: key.identifier, owner: identity.bundleIdentifier, family: key.family, configuration: configuration, createdAt: clock.now)
        let session = try DaemonSession(layout: layout, log: log, record: record, root: root)
        surroundings.sessions[key] = session
        log.error("store", "\(problem): the session is taken up by \(identity.bundleIdentifier) with the configuration it opened it with; "
                  + "\(session.tasks.count) unfinished tasks and \(session.events.count) undelivered events kept, numbering goes on at task \(session.nextTaskIdentifier) and event \(session.record.nextEventNumber)"
                  + (hasRecord ? "; the old record is kept in session.json.unreadable" : ""), session: name)
    }

    /// The files a journal names (finished downloads, upload bodies) that lie outside every
    /// container `identity` may use: its app groups, its private container and, for an app,
    /// its extensions'. Paths outside the whole container are not counted: loading refuses them.
    private func filesOutsideContainers(of identity: AppIdentity, in contents: JournalContents) -> [String] {
        var roots = identity.appGroups.map { layout.appGroup($0).path }
        roots.append(layout.privateContainer(identity.bundleIdentifier).path)
        if identity.kind == .app {
            roots += registry.apps.values.filter { $0.identity.containingApp == identity.bundleIdentifier }.map { layout.privateContainer($0.identity.bundleIdentifier).path }
        }
        let named = contents.events.values.compactMap(\.downloadedFile) + contents.tasks.values.compactMap(\.uploadFile)
        return named.compactMap(layout.resolveRecordPath).filter { path in
            !roots.contains { path.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }
        }.sorted()
    }
}
