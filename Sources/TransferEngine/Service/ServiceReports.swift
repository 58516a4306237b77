import Foundation
import TransferContainer
import TransferLogging

/// What the daemon tells its service manager, when one listens (`ServiceNotifier`): ready
/// once its socket serves, how many sessions and running tasks it has when that changes
/// (at most every `statusInterval`), the watchdog's keep-alive, and that it is stopping.
/// Owned by the daemon's loop thread.
final class ServiceReports {
    /// Where readiness and status go; nil: nowhere.
    private let notifier: ServiceNotifier?
    private let log: TransferLog
    /// The daemon's sessions as they are now, for the status line.
    private let sessions: () -> [SessionKey: DaemonSession]
    private var lastStatus: String?
    private var lastStatusCheck = Date.distantPast
    private var lastWatchdog = Date.distantPast
    /// Status lines are counted at most this often (every task is looked at).
    static let statusInterval: TimeInterval = 0.5

    init(notifier: ServiceNotifier?, log: TransferLog, sessions: @escaping () -> [SessionKey: DaemonSession]) {
        self.notifier = notifier
        self.log = log
        self.sessions = sessions
    }

    /// The socket serves and recovered tasks are scheduled.
    func ready() {
        send("READY=1\nSTATUS=\(status())\nMAINPID=\(getpid())")
    }

    func stopping() {
        send("STOPPING=1\nSTATUS=stopping")
    }

    /// Called every housekeeping turn (real time: the watchdog is the service manager's clock).
    func report() {
        guard let notifier else { return }
        let now = Date()
        if let interval = notifier.watchdogInterval, now.timeIntervalSince(lastWatchdog) >= interval / 2 {
            lastWatchdog = now
            send("WATCHDOG=1")
        }
        guard now.timeIntervalSince(lastStatusCheck) >= Self.statusInterval else { return }
        lastStatusCheck = now
        let current = status()
        guard current != lastStatus else { return }
        send("STATUS=\(current)")
    }

    private func status() -> String {
        let sessions = sessions()
        let running = sessions.values.reduce(0) { sum, session in sum + session.tasks.values.count { $0.state == .running } }
        return "\(sessions.count) sessions, \(running) running tasks"
    }

    private func send(_ state: String) {
        guard let notifier else { return }
        do {
            try notifier.send(state)
            if let status = state.split(separator: "\n").first(where: { $0.hasPrefix("STATUS=") }) { lastStatus = String(status.dropFirst("STATUS=".count)) }
        } catch where error.code == EAGAIN {
            // The manager is behind: this one is dropped, a status is sent again next time.
        } catch {
            log.error("daemon", "cannot tell the service manager \(state.split(separator: "\n").first ?? ""): \(error)")
        }
    }
}
