import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

extension RequestHandler {
    /// The user's force quit (S4.2): the app's processes end, every task of its sessions (its
    /// extensions' too) is cancelled with -999 and reason 0, and nothing is relaunched until
    /// the user launches the app.
    func forceQuit(_ bundle: BundleIdentifier) throws -> DaemonReply {
        let family = registry.family(of: bundle)
        registry.setForceQuit(family, true)
        var terminated: [Int32] = []
        for session in surroundings.sessions.values where session.key.family == family {
            if let holder = session.holder, let pid = holder.pid {
                kill(pid, SIGKILL)
                terminated.append(pid)
                clients.disconnect(holder)
            }
        }
        if let launch = relauncher.launches[family] {
            kill(launch.pid, SIGKILL)
            terminated.append(launch.pid)
        }
        var cancelled = 0
        for session in surroundings.sessions.values where session.key.family == family {
            for task in session.unfinishedTasks {
                try surroundings.cancelTask(task.taskIdentifier, in: session, failure: TransferFailure(code: TransferFailure.cancelled, message: "cancelled: the user force-quit the app", backgroundTaskCancelledReason: 0), keepResumeData: true)
                cancelled += 1
            }
        }
        log.notice("relaunch", "\(family) force-quit by the user: \(cancelled) tasks cancelled, processes \(terminated) ended; no relaunch until the user launches it")
        return .forceQuitDone(cancelledTasks: cancelled, terminatedProcesses: Array(Set(terminated)).sorted())
    }
}
