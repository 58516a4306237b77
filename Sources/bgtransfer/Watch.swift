import Foundation
import TransferContainer
import ProgressDisplay

/// `bgtransfer watch [--session ID] [--once]`: the container's running transfers as they
/// happen, from the daemon's watch pushes (`DaemonRequest.watch`). On a terminal, live
/// progress bars (`WatchBoard`); otherwise a plain line when a task starts and when it
/// finishes (`WatchTranscript`); with `--once`, a plain listing of what runs now.
/// Runs on the main thread, blocked on the daemon's socket between pushes.
enum Watch {
    /// How often to look for a daemon that is not running.
    static let daemonPollInterval: useconds_t = 250_000

    static func run(layout: ContainerLayout, arguments: [String]) -> Never {
        var session: String?
        var once = false
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--once": once = true
            case "--session":
                guard let value = rest.popFirst() else { Tool.fail("--session needs an identifier", status: 64) }
                session = value
            default: Tool.fail("watch: unknown option \(option)", status: 64)
            }
        }
        let keep = { (status: TransferStatus) in session == nil || status.session.rawValue == session }
        if once { listOnce(layout: layout, keep: keep) }

        let display: any WatchDisplay = Terminal.isTerminal(STDOUT_FILENO) ? WatchBoard() : WatchTranscript()
        var saidNotRunning = false
        while true {
            do throws(TransferFailure) {
                try DaemonEndpoint.stream(.watch, as: Tool.hello, layout: layout) { frame in
                    guard case .push(.transfers(let statuses)) = frame else { return true }
                    saidNotRunning = false
                    display.show(statuses.filter(keep))
                    return true
                }
                // The daemon closed the connection: it stopped (idle, signal) or died.
            } catch let failure where failure.code == TransferFailure.cannotConnectToHost || failure.code == TransferFailure.networkConnectionLost {
                // Not running (yet): wait for it below.
            } catch let failure {
                display.stop()
                Tool.fail("watch: \(failure.message)", status: 1)
            }
            if !saidNotRunning {
                display.daemonNotRunning()
                saidNotRunning = true
            }
            usleep(daemonPollInterval)
        }
    }

    /// `--once`: one listing of what runs now, then exit (status 1 when no daemon runs).
    private static func listOnce(layout: ContainerLayout, keep: (TransferStatus) -> Bool) -> Never {
        var listed: [TransferStatus]?
        do throws(TransferFailure) {
            try DaemonEndpoint.stream(.watch, as: Tool.hello, layout: layout) { frame in
                guard case .push(.transfers(let statuses)) = frame else { return true }
                listed = statuses.filter(keep)
                return false
            }
        } catch {
            Tool.fail(error.code == TransferFailure.cannotConnectToHost ? "transferd is not running" : "watch: \(error.message)", status: 1)
        }
        guard let listed else { Tool.fail("transferd closed the connection before saying what runs", status: 1) }
        print(listed.isEmpty ? "no transfers running" : listed.map { WatchTranscript.line($0) }.joined(separator: "\n"))
        exit(0)
    }
}

/// Where `bgtransfer watch` shows what it hears. Owned by the main thread.
protocol WatchDisplay: AnyObject {
    /// The running tasks now (every push, about four times a second while anything runs).
    func show(_ statuses: [TransferStatus])
    /// No daemon answers; the watch waits for one.
    func daemonNotRunning()
    /// The watch ends (the terminal is left as it was found).
    func stop()
}
