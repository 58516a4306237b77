import Foundation
import Testing
import TransferContainer
import HTTPFormats
import TransferTransport
@testable import TransferEngine

/// The task lifecycle's rules on their own (`TaskLifecycle`): values in, actions out, a clock
/// the test moves. No daemon, no disk, no waiting.
@Suite struct TaskLifecycleTests {
    let lifecycle = TaskLifecycle()
    let clock = ManualClock()
    static let family = (try? BundleIdentifier("com.example.host"))!
    static let identifier = (try? SessionIdentifier("com.example.host.background"))!

    /// A resumed download task created now.
    func download(kind: TaskKind = .download) -> TaskRecord {
        var task = TaskRecord(taskIdentifier: 7, kind: kind, originalRequest: RequestRecord(url: "http://127.0.0.1:9/file"), createdAt: clock.now)
        task.state = .running
        return task
    }

    /// The task a `.hold` action keeps, and the hold.
    func held(_ actions: [LifecycleAction]) -> (TaskRecord, TaskHold)? {
        guard case .hold(let task, let hold)? = actions.first else { return nil }
        return (task, hold)
    }

    /// The task and ending an `.end` action gives.
    func ended(_ actions: [LifecycleAction]) -> (TaskRecord, TaskEnding)? {
        for case .end(let task, let ending) in actions { return (task, ending) }
        return nil
    }

    @Test("Network trouble is retried after a doubling backoff, with a wake at the retry, until the resource deadline; the next failure after it ends the task with -1001 and resume data")
    func retryThenGiveUpAtTheDeadline() throws {
        let trouble = RetryCause.networkTrouble(code: TransferFailure.cannotConnectToHost, message: "refused")
        var task = download()
        var waits: [TimeInterval] = []
        while clock.now.timeIntervalSince(task.createdAt) < 10 {
            let actions = lifecycle.onTransferEnded(task, outcome: .mayRetry(trouble), resourceTimeout: 10, now: clock.now)
            let (kept, hold) = try #require(held(actions), "ended after \(waits.count) retries: \(actions)")
            guard case .retry(let attempt, let start, let cause) = hold else { Issue.record("held by \(hold)"); return }
            #expect(attempt == waits.count + 1 && kept.retryCount == attempt && cause == trouble && kept.retryCause == trouble)
            #expect(kept.retryNotBefore == start)
            #expect(actions.last == .wake(at: start), "the scheduler looks again when the retry comes due")
            waits.append(start.timeIntervalSince(clock.now))
            clock.advance(by: start.timeIntervalSince(clock.now)) // the retry comes, and fails again
            task = kept
        }
        #expect(waits == [0.25, 0.5, 1, 2, 4, 8])
        let actions = lifecycle.onTransferEnded(task, outcome: .mayRetry(trouble), resourceTimeout: 10, now: clock.now)
        let (_, ending) = try #require(ended(actions), "\(actions)")
        #expect(ending == .failed(try #require(ending.error), keepsResumeData: true))
        #expect(ending.error?.code == TransferFailure.timedOut)
        #expect(ending.downloadedFile == nil)
    }

    @Test("A running task past its resource deadline stops and ends with -1001 and resume data; at the deadline itself, or suspended, nothing happens")
    func resourceDeadline() throws {
        var task = download()
        #expect(lifecycle.onTimer(task, resourceTimeout: 60, now: clock.now.addingTimeInterval(60)).isEmpty)
        let actions = lifecycle.onTimer(task, resourceTimeout: 60, now: clock.now.addingTimeInterval(60.5))
        #expect(actions.first == .stopTransfer(taskIdentifier: task.taskIdentifier), "what the transfer learnt goes into the record first")
        #expect(ended(actions)?.1.error?.code == TransferFailure.timedOut)
        #expect(ended(actions).map { if case .failed(_, true) = $0.1 { true } else { false } } == true)
        task.state = .suspended
        #expect(lifecycle.onTimer(task, resourceTimeout: 60, now: clock.now.addingTimeInterval(3600)).isEmpty)
    }

    @Test("A 503 or a 429 with Retry-After (seconds or an HTTP date) waits exactly as asked; one that would end past the resource deadline ends the task now with -1001; without Retry-After, or a 500, it is the task's answer")
    func serverAskedToWait() throws {
        for (status, value) in [(503, "120"), (429, HTTPDate.format(Int(clock.now.timeIntervalSince1970) + 120))] {
            let cause = try #require(RetryPolicy.serverWait(status: status, retryAfter: value, now: clock.now), "\(status) \(value)")
            let actions = lifecycle.onTransferEnded(download(), outcome: .mayRetry(cause), resourceTimeout: 600, now: clock.now)
            let (_, hold) = try #require(held(actions), "\(status): \(actions)")
            #expect(hold == .retry(attempt: 1, at: clock.now.addingTimeInterval(120), cause: .serverAskedToWait(status: status, seconds: 120)))
            #expect(actions.last == .wake(at: clock.now.addingTimeInterval(120)))
        }
        #expect(RetryPolicy.serverWait(status: 503, retryAfter: nil, now: clock.now) == nil)
        #expect(RetryPolicy.serverWait(status: 500, retryAfter: "5", now: clock.now) == nil)
        let hopeless = try #require(RetryPolicy.serverWait(status: 429, retryAfter: "3600", now: clock.now))
        let actions = lifecycle.onTransferEnded(download(), outcome: .mayRetry(hopeless), resourceTimeout: 600, now: clock.now)
        #expect(ended(actions)?.1.error?.code == TransferFailure.timedOut, "\(actions)")
    }

    @Test("A finished download ends with its file and no error, an upload with the server's answer; a download that ran out of disk keeps resume data, an upload does not; other failures end with their own code")
    func completionEvents() throws {
        let file = "Sessions/com.example.host/x/Downloads/CFNetworkDownload_7.tmp"
        let downloaded = try #require(ended(lifecycle.onTransferEnded(download(), outcome: .downloaded(file: file), resourceTimeout: 60, now: clock.now)))
        #expect(downloaded.1.downloadedFile == file && downloaded.1.error == nil && downloaded.1.responseBody == nil)
        #expect(downloaded.0 == download(), "the event carries the task as it ended")

        let body = Data("thanks".utf8)
        let uploaded = try #require(ended(lifecycle.onTransferEnded(download(kind: .upload), outcome: .uploaded(responseBody: body), resourceTimeout: 60, now: clock.now)))
        #expect(uploaded.1.responseBody == body && uploaded.1.downloadedFile == nil && uploaded.1.error == nil)

        let full = TransferFailure(code: TransferFailure.cannotWriteToFile, message: "disk full")
        #expect(ended(lifecycle.onTransferEnded(download(), outcome: .failed(full), resourceTimeout: 60, now: clock.now))?.1 == .failed(full, keepsResumeData: true))
        #expect(ended(lifecycle.onTransferEnded(download(kind: .upload), outcome: .failed(full), resourceTimeout: 60, now: clock.now))?.1 == .failed(full, keepsResumeData: false))

        let redirects = RetryCause.networkTrouble(code: -1007, message: "too many redirects")
        let failed = try #require(ended(lifecycle.onTransferEnded(download(), outcome: .mayRetry(redirects), resourceTimeout: 60, now: clock.now)))
        #expect(failed.1.error?.code == -1007 && failed.1.error?.message == "too many redirects")
        #expect(failed.0.retryCause == redirects, "the record says what the last attempt met")

        let disagreeing = RetryCause.trustDisagreement(host: "127.0.0.1", port: 9, count: 6)
        let untrusted = try #require(ended(lifecycle.onTransferEnded(download(), outcome: .mayRetry(disagreeing), resourceTimeout: 60, now: clock.now)))
        #expect(untrusted.1.error?.code == TransferFailure.serverCertificateUntrusted && untrusted.1.error?.failingURL == "http://127.0.0.1:9/file")
    }

    /// A session whose events wait for its app, nobody holding it.
    var waiting: RelaunchNeed { RelaunchNeed(family: Self.family, session: Self.identifier, hasEvents: true) }

    @Test("The relaunch limiter: each background relaunch doubles the delay before the next (60, 120, 240 s); a quiet period of twice the delay starts it over at 60 s")
    func relaunchLimiter() throws {
        var limiters: [BundleIdentifier: RelaunchLimiter] = [:]
        var launchedAt: [TimeInterval] = []
        let start = clock.now
        /// Asks the rules at the current time; a relaunch decided is taken as made (and ended).
        func turn() {
            for action in lifecycle.relaunches([waiting], launching: [], running: [], limiters: limiters, now: clock.now) {
                switch action {
                case .resetLimiter(let family): limiters[family] = nil
                case .relaunch(let family, let identifier, let limiter):
                    #expect(family == Self.family && identifier == Self.identifier)
                    limiters[family] = limiter
                    launchedAt.append(clock.now.timeIntervalSince(start))
                default: Issue.record("unexpected \(action)")
                }
            }
        }
        for _ in 0..<500 { // one look a second, for 500 s
            turn()
            clock.advance(by: 1)
        }
        #expect(launchedAt == [0, 60, 180, 420])
        #expect(limiters[Self.family]?.delay == 480)
        clock.advance(by: 420 + 2 * 480 - 500) // quiet for twice the delay since the last launch
        let actions = lifecycle.relaunches([waiting], launching: [], running: [], limiters: limiters, now: clock.now)
        #expect(actions == [.resetLimiter(Self.family), .relaunch(Self.family, session: Self.identifier, limiter: RelaunchLimiter(delay: 60, lastLaunch: clock.now))])
    }

    @Test("No relaunch while the app's launch runs, beside a copy already connected, while a task still transfers, after a force quit (the events then wait for the user), or for a session that sends no launch events; a pending challenge wants the app even while tasks run")
    func whomToRelaunch() {
        func decides(_ need: RelaunchNeed, launching: Set<BundleIdentifier> = [], running: Set<BundleIdentifier> = []) -> Bool {
            !lifecycle.relaunches([need], launching: launching, running: running, limiters: [:], now: clock.now).isEmpty
        }
        #expect(decides(waiting))
        #expect(!decides(waiting, launching: [Self.family]))
        #expect(!decides(waiting, running: [Self.family]))
        var need = waiting
        need.hasTransfersInFlight = true
        #expect(!decides(need), "the app gets the events at once, when no task still transfers")
        need.hasPendingChallenge = true
        #expect(decides(need))
        need = waiting
        need.waitsForUser = true
        #expect(!decides(need))
        #expect(need.waitsForUserLaunch && !waiting.waitsForUserLaunch, "said instead: the events wait for the user")
        need = waiting
        need.sendsLaunchEvents = false
        #expect(!decides(need))
        need = waiting
        need.isHeld = true
        #expect(!decides(need))
        need = waiting
        need.hasEvents = false
        #expect(!decides(need))
        let other = RelaunchNeed(family: Self.family, session: (try? SessionIdentifier("com.example.host.other"))!, hasEvents: true)
        #expect(lifecycle.relaunches([waiting, other], launching: [], running: [], limiters: [:], now: clock.now).count == 1, "one launch of an app at a time")
    }

    @Test("An app launched for events is killed once it runs past its background budget (30 s), once; one within it is left alone")
    func backgroundBudget() {
        var launches = [Self.family: Launch(pid: 4242, identifier: Self.identifier, at: clock.now)]
        #expect(lifecycle.overBudget(launches, now: clock.now.addingTimeInterval(30)).isEmpty)
        #expect(lifecycle.overBudget(launches, now: clock.now.addingTimeInterval(30.5)) == [.terminate(Self.family, pid: 4242)])
        launches[Self.family]?.terminated = true
        #expect(lifecycle.overBudget(launches, now: clock.now.addingTimeInterval(60)).isEmpty)
    }

    @Test("A task an app creates in the background while its limiter runs starts after the limiter's delay; an extension's, or once the limiter lapsed, at once")
    func rateLimitedStart() {
        let app = AppIdentity(bundleIdentifier: Self.family, kind: .app, containingApp: Self.family, containingAppExecutable: "host-app", appGroups: [])
        let limiter = RelaunchLimiter(delay: 120, lastLaunch: clock.now)
        #expect(lifecycle.rateLimitedStart(for: app, limiter: limiter, now: clock.now.addingTimeInterval(10)) == clock.now.addingTimeInterval(130))
        #expect(lifecycle.rateLimitedStart(for: app, limiter: limiter, now: clock.now.addingTimeInterval(240)) == nil)
        #expect(lifecycle.rateLimitedStart(for: app, limiter: nil, now: clock.now) == nil)
        var extensionIdentity = app
        extensionIdentity.kind = .appExtension
        #expect(lifecycle.rateLimitedStart(for: extensionIdentity, limiter: limiter, now: clock.now) == nil)
    }
}
