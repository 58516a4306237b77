import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging
import TransferTransport

/// What the relauncher sees of the rest of the daemon: the sessions, and which apps are
/// connected. `TransferDaemon` answers; a part that needs no more is given no more.
protocol RelaunchSurroundings: AnyObject {
    var sessions: [SessionKey: DaemonSession] { get }
    /// Whether the containing app of `family` is connected (launched by the user, or by us).
    func isAppConnected(_ family: BundleIdentifier) -> Bool
}

/// Relaunching containing apps when events wait (S3.1, S1.6): carries out what
/// `TaskLifecycle` decides of whom to relaunch and when (the rate limiter, S6.5, and the
/// background budget), keeps the launches it made, and gives up on relaunches that fail
/// (`RelaunchGiveUp`). Owned by the daemon's loop thread.
final class Relauncher {
    private unowned let surroundings: any RelaunchSurroundings
    private let registry: AppRegistry
    private let lifecycle: TaskLifecycle
    private let layout: ContainerLayout
    private let log: TransferLog
    private let clock: any TimeSource
    /// The containing apps launched for events, by family.
    var launches: [BundleIdentifier: Launch] = [:]
    /// Sessions whose events wait for a user launch, as last said in the log (said once a wait).
    private var saidWaitingForUser: Set<SessionKey> = []
    /// The resume rate limiter per app family, kept in the registry so that inspection sees it.
    var relaunchLimiter: [BundleIdentifier: RelaunchLimiter] {
        get { registry.relaunchLimits }
        set { registry.relaunchLimits = newValue }
    }

    init(surroundings: any RelaunchSurroundings, registry: AppRegistry, lifecycle: TaskLifecycle, layout: ContainerLayout, log: TransferLog, clock: any TimeSource) {
        self.surroundings = surroundings
        self.registry = registry
        self.lifecycle = lifecycle
        self.layout = layout
        self.log = log
        self.clock = clock
    }

    /// What the relaunch rules know of `session` now, from its counts of running tasks (not
    /// its tasks): this runs for every session at each housekeeping.
    private func need(of session: DaemonSession) -> RelaunchNeed {
        let family = session.key.family
        var need = RelaunchNeed(family: family, session: session.key.identifier, isHeld: session.holder != nil,
                                sendsLaunchEvents: session.record.configuration.sessionSendsLaunchEvents,
                                waitsForUser: registry.forceQuit.contains(family) || registry.relaunchFailures[family]?.hasGivenUp == true,
                                hasEvents: !session.events.isEmpty)
        guard !need.isHeld, need.sendsLaunchEvents, !need.waitsForUser else { return need }
        if need.hasEvents { need.hasTransfersInFlight = session.runningCounts.unchallenged > 0 }
        if !need.hasEvents || need.hasTransfersInFlight {
            need.hasPendingChallenge = session.runningCounts.challenged > 0
        }
        return need
    }

    /// Whether `session` wants its app launched (`RelaunchNeed.wantsRelaunch`).
    func wantsRelaunch(_ session: DaemonSession) -> Bool {
        need(of: session).wantsRelaunch
    }

    func relaunchWhereNeeded(now: Date) {
        var needs: [RelaunchNeed] = []
        var waitingForUser: Set<SessionKey> = []
        for session in surroundings.sessions.values.sorted(by: { $0.key.identifier.rawValue < $1.key.identifier.rawValue }) {
            let need = need(of: session)
            if need.wantsRelaunch { needs.append(need) } else if need.waitsForUserLaunch { waitingForUser.insert(session.key) }
        }
        sayWaitingForUser(waitingForUser)
        guard !needs.isEmpty else { return }
        let running = Set(needs.map(\.family).filter { surroundings.isAppConnected($0) })
        for action in lifecycle.relaunches(needs, launching: Set(launches.keys), running: running, limiters: relaunchLimiter, now: now) {
            switch action {
            case .resetLimiter(let family): relaunchLimiter[family] = nil
            case .relaunch(let family, let identifier, let limiter): launch(family, for: identifier, limiter: limiter, now: now)
            default: break
            }
        }
    }

    /// Logs, once a wait, each session whose events wait for a user launch, and why: the
    /// decision not to relaunch, which a test can wait for instead of for time to pass.
    private func sayWaitingForUser(_ waiting: Set<SessionKey>) {
        for key in waiting.subtracting(saidWaitingForUser).sorted(by: { $0.identifier.rawValue < $1.identifier.rawValue }) {
            let why = registry.forceQuit.contains(key.family) ? "it was force-quit" : "its relaunches were given up on"
            log.notice("relaunch", "not relaunching \(key.family) for its events: \(why); they wait for the user to launch it", session: key.identifier.rawValue,
                       event: LogEvent(.relaunchLeftToUser, app: key.family.rawValue))
        }
        saidWaitingForUser = waiting
    }

    private func launch(_ family: BundleIdentifier, for identifier: SessionIdentifier, limiter: RelaunchLimiter, now: Date) {
        guard let executable = registry.launchExecutable(family: family) else {
            return // never heard of this app's executable; it will say hello when run
        }
        relaunchLimiter[family] = limiter // whether the launch starts or not
        do {
            let pid = try ProcessSpawner.spawn(executable, arguments: ["--container", layout.root.path, "--handle-events-for-background-session", identifier.rawValue], newSession: true, outputPath: layout.logsDirectory.appendingPathComponent("launched-apps.out").path)
            launches[family] = Launch(pid: pid, identifier: identifier, at: now)
            log.notice("relaunch", "launched \(family) (pid \(pid)) to handle events for background session \(identifier)", session: identifier.rawValue,
                       event: LogEvent(.launched, app: family.rawValue, pid: pid))
        } catch {
            log.error("relaunch", "cannot launch \(executable): \(error)", session: identifier.rawValue, event: LogEvent(.launchFailed, app: executable))
            relaunchFailed(family, session: identifier, now: now)
        }
    }

    /// An app launched for events that has not finished within the budget is terminated,
    /// as iOS would; its unacknowledged events wait for the next launch.
    func enforceBackgroundBudget(now: Date) {
        for case .terminate(let family, let pid) in lifecycle.overBudget(launches, now: now) {
            kill(pid, SIGKILL)
            launches[family]?.terminated = true
            log.error("relaunch", "\(family) (pid \(pid)) did not call its completion handler within its background budget of \(lifecycle.backgroundBudget) s; terminated", session: launches[family]?.identifier.rawValue,
                      event: LogEvent(.budgetExpired, app: family.rawValue, pid: pid))
        }
    }

    func launchEnded(pid: Int32) {
        guard let (family, launch) = launches.first(where: { $0.value.pid == pid }) else { return }
        launches.removeValue(forKey: family)
        let pending = surroundings.sessions[SessionKey(family: family, identifier: launch.identifier)]?.events.count ?? 0
        log.info("relaunch", "launched app \(family) (pid \(pid)) exited; \(pending) events still undelivered", session: launch.identifier.rawValue,
                 event: LogEvent(.launchedAppExited, app: family.rawValue, pid: pid, pending: pending))
        if !launch.attached { relaunchFailed(family, session: launch.identifier, now: clock.now) }
    }

    /// The app launched for `identifier` opened that session: its relaunches work.
    func launchAttached(_ key: SessionKey) {
        guard let launch = launches[key.family], launch.identifier == key.identifier else { return }
        launches[key.family]?.attached = true
        registry.relaunchFailures[key.family] = nil
    }

    /// The user launched the app: relaunching it is worth trying again.
    func userLaunched(_ family: BundleIdentifier) {
        guard let failures = registry.relaunchFailures.removeValue(forKey: family) else { return }
        if failures.hasGivenUp { log.notice("relaunch", "\(family) launched by the user: relaunching it is tried again") }
    }

    /// A launch that could not start, or a launched process that exited without opening its
    /// session: counted, and said once when it makes the daemon give up on the app.
    private func relaunchFailed(_ family: BundleIdentifier, session: SessionIdentifier, now: Date) {
        var failures = registry.relaunchFailures[family] ?? RelaunchGiveUp()
        let givesUp = failures.failed(at: now)
        registry.relaunchFailures[family] = failures
        if givesUp {
            log.error("relaunch", "gave up relaunching \(family) after \(failures.failures) failed relaunches in a row (launches that could not start, or apps that exited without opening the session); its events wait for the user to launch it", session: session.rawValue,
                  event: LogEvent(.relaunchGivenUp, app: family.rawValue))
        }
    }

    /// When a task the app creates now, in the background, may start (`TaskLifecycle.rateLimitedStart`).
    func rateLimitedStart(for identity: AppIdentity) -> Date? {
        lifecycle.rateLimitedStart(for: identity, limiter: relaunchLimiter[identity.family], now: clock.now)
    }
}
