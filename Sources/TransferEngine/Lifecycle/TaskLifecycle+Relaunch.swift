import Foundation
import TransferContainer

/// What the relaunch rules know of one session (S3.1, S1.6), as values the daemon gathers.
struct RelaunchNeed: Equatable {
    var family: BundleIdentifier
    var session: SessionIdentifier
    /// A process holds the session now.
    var isHeld = false
    /// The session's configuration asks for launch events.
    var sendsLaunchEvents = true
    /// The app is force-quit, or its relaunches were given up on: its events wait for the user.
    var waitsForUser = false
    /// Undelivered events wait.
    var hasEvents = false
    /// A task of the session still transfers (running, and not waiting for an answer).
    var hasTransfersInFlight = false
    /// A task waits for the app to answer an authentication challenge.
    var hasPendingChallenge = false

    /// Whether the session wants its app launched: nobody holds it, it asked for launch events,
    /// the app is not waiting for the user, and either events wait and no task still
    /// transfers (the app gets them all at once), or a challenge waits for its answer.
    var wantsRelaunch: Bool {
        !isHeld && sendsLaunchEvents && !waitsForUser && ((hasEvents && !hasTransfersInFlight) || hasPendingChallenge)
    }

    /// Whether events wait for an app that only the user may launch now (force-quit, or its
    /// relaunches given up on): the daemon says so once, instead of relaunching it.
    var waitsForUserLaunch: Bool {
        !isHeld && sendsLaunchEvents && waitsForUser && hasEvents
    }
}

/// Whom to relaunch and when: the resume rate limiter (S6.5) and the background budget.
extension TaskLifecycle {
    /// Of the sessions in `needs` (in the order given), those whose app is launched now: one
    /// launch of an app at a time, none beside a copy already running (it gets ordinary
    /// delegate calls when it opens the session), and none while the app's limiter runs.
    /// `launching`: the apps launched for events that have not exited; `running`: the apps
    /// connected now; `limiters`: each app's rate limiter.
    func relaunches(_ needs: [RelaunchNeed], launching: Set<BundleIdentifier>, running: Set<BundleIdentifier>,
                    limiters: [BundleIdentifier: RelaunchLimiter], now: Date) -> [LifecycleAction] {
        var actions: [LifecycleAction] = []
        var decided = launching.union(running)
        for need in needs where need.wantsRelaunch && !decided.contains(need.family) {
            var limiter = limiters[need.family]
            if let running = limiter {
                if running.hasLapsed(at: now) {
                    limiter = nil // quiet for a whole period: start over
                    actions.append(.resetLimiter(need.family))
                } else if !running.allowsLaunch(at: now) {
                    continue
                }
            }
            decided.insert(need.family)
            actions.append(.relaunch(need.family, session: need.session, limiter: .afterRelaunch(limiter, initialDelay: relaunchDelay, at: now)))
        }
        return actions
    }

    /// The apps launched for events that have run past their background budget by `now`
    /// and were not killed yet: killed, as iOS would; their events wait for the next launch.
    func overBudget(_ launches: [BundleIdentifier: Launch], now: Date) -> [LifecycleAction] {
        launches.sorted { $0.key < $1.key }.compactMap { family, launch in
            !launch.terminated && now.timeIntervalSince(launch.at) > backgroundBudget ? .terminate(family, pid: launch.pid) : nil
        }
    }

    /// When a task an app (not an extension) creates now, in the background, may start:
    /// after the app's current relaunch delay while its limiter runs; nil when it does not.
    func rateLimitedStart(for identity: AppIdentity, limiter: RelaunchLimiter?, now: Date) -> Date? {
        guard identity.kind == .app, let limiter, !limiter.hasLapsed(at: now) else { return nil }
        return now.addingTimeInterval(limiter.delay)
    }
}
