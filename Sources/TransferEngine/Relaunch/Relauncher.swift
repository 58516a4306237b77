import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

/// Relaunching containing apps when events wait (S3.1, S1.6): which session wants its app,
/// the resume rate limiter (S6.5), the background budget, giving up on relaunches that fail
/// (`RelaunchGiveUp`). Owned by the daemon's loop thread.
final class Relauncher {
    unowned let daemon: TransferDaemon
    /// The containing apps launched for events, by family.
    var launches: [BundleIdentifier: Launch] = [:]
    /// The resume rate limiter per app family, kept in the registry so that inspection sees it.
    var relaunchLimiter: [BundleIdentifier: RelaunchLimiter] {
        get { daemon.registry.relaunchLimits }
        set { daemon.registry.relaunchLimits = newValue }
    }

    init(daemon: TransferDaemon) {
        self.daemon = daemon
    }

    /// A session wants its app launched when nobody holds it, it asked for launch events,
    /// and either events wait and no task of it still runs, or a task needs the app to answer
    /// an authentication challenge (S3.1). Not while the app is force-quit or its relaunches
    /// were given up on: its events wait for the user (and keep no on-demand daemon up).
    func wantsRelaunch(_ session: DaemonSession) -> Bool {
        session.holder == nil
            && session.record.configuration.sessionSendsLaunchEvents
            && !daemon.registry.forceQuit.contains(session.key.family)
            && daemon.registry.relaunchFailures[session.key.family]?.hasGivenUp != true
            && ((!session.events.isEmpty && !session.tasks.values.contains { $0.state == .running && $0.pendingChallenge == nil })
                || daemon.challenges.hasPendingChallenge(session))
    }

    func relaunchWhereNeeded(now: Date) {
        for session in daemon.sessions.values.sorted(by: { $0.key.identifier.rawValue < $1.key.identifier.rawValue }) where wantsRelaunch(session) {
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
            guard let executable = daemon.registry.launchExecutable(family: family) else {
                continue // never heard of this app's executable; it will say hello when run
            }
            do {
                let pid = try ProcessSpawner.spawn(executable, arguments: ["--container", daemon.layout.root.path, "--handle-events-for-background-session", session.key.identifier.rawValue], newSession: true, outputPath: daemon.layout.logsDirectory.appendingPathComponent("launched-apps.out").path)
                launches[family] = Launch(pid: pid, identifier: session.key.identifier, at: now)
                relaunchLimiter[family] = .afterRelaunch(relaunchLimiter[family], initialDelay: daemon.options.relaunchDelay, at: now)
                daemon.log.notice("relaunch", "launched \(family) (pid \(pid)) to handle events for background session \(session.key.identifier)", session: session.key.identifier.rawValue,
                                  event: LogEvent(.launched, app: family.rawValue, pid: pid))
            } catch {
                daemon.log.error("relaunch", "cannot launch \(executable): \(error)", session: session.key.identifier.rawValue, event: LogEvent(.launchFailed, app: executable))
                relaunchLimiter[family] = .afterRelaunch(relaunchLimiter[family], initialDelay: daemon.options.relaunchDelay, at: now)
                relaunchFailed(family, session: session.key.identifier, now: now)
            }
        }
    }

    /// Whether the containing app of `family` is connected (launched by the user, or by us).
    func isRunning(_ family: BundleIdentifier) -> Bool {
        daemon.clients.connections.values.contains { $0.hello?.identity.bundleIdentifier == family && $0.hello?.identity.kind == .app }
    }

    /// An app launched for events that has not finished within the budget is terminated,
    /// as iOS would; its unacknowledged events wait for the next launch.
    func enforceBackgroundBudget(now: Date) {
        for (family, launch) in launches where !launch.terminated && now.timeIntervalSince(launch.at) > daemon.options.backgroundBudget {
            kill(launch.pid, SIGKILL)
            launches[family]?.terminated = true
            daemon.log.error("relaunch", "\(family) (pid \(launch.pid)) did not call its completion handler within its background budget of \(daemon.options.backgroundBudget) s; terminated", session: launch.identifier.rawValue,
                             event: LogEvent(.budgetExpired, app: family.rawValue, pid: launch.pid))
        }
    }

    func launchEnded(pid: Int32) {
        guard let (family, launch) = launches.first(where: { $0.value.pid == pid }) else { return }
        launches.removeValue(forKey: family)
        let pending = daemon.sessions[SessionKey(family: family, identifier: launch.identifier)]?.events.count ?? 0
        daemon.log.info("relaunch", "launched app \(family) (pid \(pid)) exited; \(pending) events still undelivered", session: launch.identifier.rawValue,
                        event: LogEvent(.launchedAppExited, app: family.rawValue, pid: pid))
        if !launch.attached { relaunchFailed(family, session: launch.identifier, now: daemon.clock.now) }
    }

    /// The app launched for `identifier` opened that session: its relaunches work.
    func launchAttached(_ key: SessionKey) {
        guard let launch = launches[key.family], launch.identifier == key.identifier else { return }
        launches[key.family]?.attached = true
        daemon.registry.relaunchFailures[key.family] = nil
    }

    /// The user launched the app: relaunching it is worth trying again.
    func userLaunched(_ family: BundleIdentifier) {
        guard let failures = daemon.registry.relaunchFailures.removeValue(forKey: family) else { return }
        if failures.hasGivenUp { daemon.log.notice("relaunch", "\(family) launched by the user: relaunching it is tried again") }
    }

    /// A launch that could not start, or a launched process that exited without opening its
    /// session: counted, and said once when it makes the daemon give up on the app.
    private func relaunchFailed(_ family: BundleIdentifier, session: SessionIdentifier, now: Date) {
        var failures = daemon.registry.relaunchFailures[family] ?? RelaunchGiveUp()
        let givesUp = failures.failed(at: now)
        daemon.registry.relaunchFailures[family] = failures
        if givesUp {
            daemon.log.error("relaunch", "gave up relaunching \(family) after \(failures.failures) failed relaunches in a row (launches that could not start, or apps that exited without opening the session); its events wait for the user to launch it", session: session.rawValue,
                             event: LogEvent(.relaunchGivenUp, app: family.rawValue))
        }
    }


    /// When a task the app creates now, in the background, may start: after the app's
    /// current relaunch delay, while its rate limiter runs; nil when it does not.
    func rateLimitedStart(for identity: AppIdentity) -> Date? {
        let now = daemon.clock.now
        guard identity.kind == .app, let limiter = relaunchLimiter[identity.family],
              !limiter.hasLapsed(at: now) else { return nil }
        return now.addingTimeInterval(limiter.delay)
    }
}
