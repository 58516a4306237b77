import Foundation
import TransferContainer

/// A containing app the daemon launched to take a session's events.
struct Launch {
    var pid: Int32
    var identifier: SessionIdentifier
    var at: Date
    /// Killed for exceeding its background budget (waiting to be reaped).
    var terminated = false
}

/// The resume rate limiter of one app (S6.5): each background relaunch doubles the delay
/// before the next; a user launch, or a quiet period as long as the delay, resets it.
struct RelaunchLimiter: Codable, Equatable {
    var delay: TimeInterval
    var lastLaunch: Date

    func allowsLaunch(at now: Date) -> Bool { now.timeIntervalSince(lastLaunch) >= delay }

    /// A quiet period of twice the delay with no relaunch: the limiter starts over (S6.5).
    func hasLapsed(at now: Date) -> Bool { now.timeIntervalSince(lastLaunch) >= 2 * delay }
}

/// Relaunching containing apps when events wait (S3.1, S1.6).
extension TransferDaemon {
    /// A session wants its app launched when nobody holds it, it asked for launch events,
    /// and either events wait and no task of it still runs, or a task needs the app to answer
    /// an authentication challenge (S3.1).
    func wantsRelaunch(_ session: DaemonSession) -> Bool {
        session.holder == nil
            && session.record.configuration.sessionSendsLaunchEvents
            && !registry.forceQuit.contains(session.key.family)
            && ((!session.events.isEmpty && !session.tasks.values.contains { $0.state == .running && $0.pendingChallenge == nil })
                || hasPendingChallenge(session))
    }

    func relaunchWhereNeeded(now: Date) {
        for session in sessions.values.sorted(by: { $0.key.identifier.rawValue < $1.key.identifier.rawValue }) where wantsRelaunch(session) {
            let family = session.key.family
            guard launches[family] == nil else { continue } // one launch of an app at a time
            // An app already running gets ordinary delegate calls when it opens the session
            // (S3.1); a second copy launched beside it would find the session in use.
            guard !isRunning(family) else { continue }
            if let limiter = relaunchLimiter[family] {
                if limiter.hasLapsed(at: now) {
                    relaunchLimiter[family] = nil // quiet for a whole period: start over
                } else if !limiter.allowsLaunch(at: now) {
                    continue
                }
            }
            guard let executable = registry.launchExecutable(family: family) else {
                continue // never heard of this app's executable; it will say hello when run
            }
            do {
                let pid = try ProcessSpawner.spawn(executable, arguments: ["--container", layout.root.path, "--handle-events-for-background-session", session.key.identifier.rawValue], newSession: true, outputPath: layout.logsDirectory.appendingPathComponent("launched-apps.out").path)
                launches[family] = Launch(pid: pid, identifier: session.key.identifier, at: now)
                let previous = relaunchLimiter[family]?.delay
                relaunchLimiter[family] = RelaunchLimiter(delay: previous.map { $0 * 2 } ?? options.relaunchDelay, lastLaunch: now)
                log.notice("relaunch", "launched \(family) (pid \(pid)) to handle events for background session \(session.key.identifier)", session: session.key.identifier.rawValue)
            } catch {
                log.error("relaunch", "cannot launch \(executable): \(error)", session: session.key.identifier.rawValue)
                relaunchLimiter[family] = RelaunchLimiter(delay: relaunchLimiter[family].map { $0.delay * 2 } ?? options.relaunchDelay, lastLaunch: now)
            }
        }
    }

    /// Whether the containing app of `family` is connected (launched by the user, or by us).
    func isRunning(_ family: BundleIdentifier) -> Bool {
        connections.values.contains { $0.hello?.identity.bundleIdentifier == family && $0.hello?.identity.kind == .app }
    }

    /// An app launched for events that has not finished within the budget is terminated,
    /// as iOS would; its unacknowledged events wait for the next launch.
    func enforceBackgroundBudget(now: Date) {
        for (family, launch) in launches where !launch.terminated && now.timeIntervalSince(launch.at) > options.backgroundBudget {
            kill(launch.pid, SIGKILL)
            launches[family]?.terminated = true
            log.error("relaunch", "\(family) (pid \(launch.pid)) did not call its completion handler within its background budget of \(options.backgroundBudget) s; terminated", session: launch.identifier.rawValue)
        }
    }

    func launchEnded(pid: Int32) {
        guard let (family, launch) = launches.first(where: { $0.value.pid == pid }) else { return }
        launches.removeValue(forKey: family)
        let pending = sessions[SessionKey(family: family, identifier: launch.identifier)]?.events.count ?? 0
        log.info("relaunch", "launched app \(family) (pid \(pid)) exited; \(pending) events still undelivered", session: launch.identifier.rawValue)
    }
}
