import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

extension RequestHandler {
    /// Opens a session for the requester (S1): the one the daemon holds, one taken up from
    /// its folder, or a new one; the requester becomes its holder. `withoutDelegate`: it has none (S1.2).
    func open(_ identifier: SessionIdentifier, _ configuration: SessionConfiguration, for hello: ClientHello,
              _ connection: ClientConnection, launchedForEvents: Bool,
              withoutDelegate: Bool = false) throws -> DaemonSession {
        let identity = hello.identity
        if let group = configuration.sharedContainerIdentifier, !identity.appGroups.contains(group) {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "\(identity.bundleIdentifier) is not entitled to app group \(group)", subject: group.rawValue)
        }
        if let group = configuration.cookies?.appGroup, !identity.appGroups.contains(group) {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "\(identity.bundleIdentifier) is not entitled to app group \(group), whose cookie storage the session names", subject: group.rawValue)
        }
        if identity.kind == .appExtension && configuration.sharedContainerIdentifier == nil {
            throw TransferFailure(code: TransferFailure.backgroundSessionRequiresSharedContainer, message: "a background session in an app extension needs a sharedContainerIdentifier", subject: identifier.rawValue)
        }
        let key = SessionKey(family: identity.family, identifier: identifier)
        // A folder left without a usable record is taken up again, never made anew over its journal.
        if surroundings.sessions[key] == nil { try sessionRecovery.takeUpSessionLeftInFolder(key, configuration, for: identity) }
        let session: DaemonSession
        if let existing = surroundings.sessions[key] {
            // The owner, or its containing app adopting an extension's session (S1.6).
            guard existing.record.owner == identity.bundleIdentifier || identity.kind == .app else {
                throw TransferFailure(code: TransferFailure.requestRefused, message: "session \(identifier) belongs to \(existing.record.owner)", subject: identifier.rawValue)
            }
            if let holder = existing.holder, holder !== connection, !holder.isClosed {
                // The same process on a new connection (it reconnected): the new one takes over.
                guard holder.pid == nil || holder.pid != connection.pid else {
                    log.info("sessions", "\(connection.label) reconnected; it takes the session over from its old connection", session: identifier.rawValue)
                    holder.attachedSessions.remove(key)
                    existing.holder = nil
                    return try open(identifier, configuration, for: hello, connection,
                                    launchedForEvents: launchedForEvents, withoutDelegate: withoutDelegate)
                }
                throw TransferFailure(code: TransferFailure.backgroundSessionInUseByAnotherProcess, message: "background session \(identifier) is already in use by another process (pid \(holder.pid ?? -1))", subject: identifier.rawValue)
            }
            // A reopened session keeps the configuration its tasks started with (S1.8).
            if existing.tasks.isEmpty { try existing.updateConfiguration(configuration) }
            session = existing
        } else {
            try quotas.checkSessions(of: identity.bundleIdentifier, opening: identifier)
            let record = SessionRecord(identifier: identifier, owner: identity.bundleIdentifier, family: identity.family, configuration: configuration, createdAt: clock.now)
            do {
                session = try DaemonSession(layout: layout, log: log, record: record, root: root)
            } catch let error as Errno {
                // A full disk: the same -3003 as a task that cannot be recorded, with the folder.
                throw JournalReserve.cannotRecord(error, writing: layout.sessionDirectory(family: key.family, identifier: identifier).path)
            }
            surroundings.sessions[key] = session
            log.notice("sessions", "created session owned by \(identity.bundleIdentifier)", session: identifier.rawValue)
        }
        session.holder = connection
        session.pushedThrough = 0
        session.owesBacklogWord = false // owed once the backlog is sent (`deliverBacklog`)
        session.holderLaunchedForEvents = launchedForEvents
        session.holderHeardBacklogWord = false
        session.invalidateWhenDone = false
        connection.attachedSessions.insert(key)
        if launchedForEvents, let launch = relauncher.launches[key.family], launch.identifier == identifier {
            relauncher.launchAttached(key)
            log.info("relaunch", "relaunched app attached (pid \(launch.pid))", session: identifier.rawValue)
        }
        log.notice("sessions", "\(connection.label) opened the session: \(session.tasks.count) unfinished tasks, \(session.events.count) undelivered events", session: identifier.rawValue,
                          event: LogEvent(.sessionOpened, pid: connection.pid))
        noteDelegate(missing: withoutDelegate, of: session, connection)
        return session
    }

    /// Records in `session.json` whether the process that opened the session has a delegate
    /// (`SessionRecord.openedWithoutDelegate`, for `inspect`), and logs one that has none. A
    /// record that cannot be written is logged: it is a diagnosis, no reason to refuse the open.
    func noteDelegate(missing: Bool, of session: DaemonSession, _ connection: ClientConnection) {
        do { try session.noteOpened(withoutDelegate: missing) } catch {
            let record = session.directory.appendingPathComponent("session.json").path
            log.error("store", "cannot record in \(record) whether the session has a delegate: \(error)",
                      session: session.key.identifier.rawValue)
        }
        guard missing else { return }
        log.notice("sessions", "\(connection.label) opened the session without a delegate: its events are "
                   + "acknowledged without reaching one (S1.2)", session: session.key.identifier.rawValue)
    }
}
