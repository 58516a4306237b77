import BackgroundTransfer
import ProgressDisplay
import TransferPOSIX

/// The progress bar a stand-in draws on stderr for the task it waits for (`--wait`), from
/// its delegate's `didWriteData` / `didSendBodyData`: one line redrawn in place, at most ten
/// times a second. Exists only when stderr is a terminal, so nothing extra reaches a pipe.
/// Called on the session's delegate queue; its state is behind a lock.
public final class WaitProgressBar: Sendable {
    private struct State {
        var rate = TransferRate()
        var lastDrawn = -TimeInterval.infinity
        var showing = false
    }

    private let state = Locked(State())
    static let redrawInterval: TimeInterval = 0.1

    private init() {}

    /// A bar when stderr is a terminal, nil otherwise.
    public static func onTerminal() -> WaitProgressBar? {
        Terminal.isTerminal(STDERR_FILENO) ? WaitProgressBar() : nil
    }

    /// `done` of `expected` bytes received (download) or sent (upload).
    func update(_ task: URLSessionTask, done: Int64, expected: Int64) {
        let now = ProcessInfo.processInfo.systemUptime
        let label = "task \(task.taskIdentifier) " + ProgressLine.taskName(description: task.taskDescription, url: task.originalRequest?.url?.absoluteString ?? "")
        state.withLock { state in
            state.rate.add(bytes: done, at: now)
            guard now - state.lastDrawn >= Self.redrawInterval || done == expected else { return }
            state.lastDrawn = now
            state.showing = true
            let line = ProgressLine(label: label, done: done, expected: expected, bytesPerSecond: state.rate.bytesPerSecond)
            Terminal.write("\r" + Terminal.eraseLine + line.render(width: Terminal.size(STDERR_FILENO).columns - 1), to: STDERR_FILENO)
        }
    }

    /// Takes the bar off the line before other output; the next update draws it again.
    func clear() {
        state.withLock { state in
            guard state.showing else { return }
            state.showing = false
            Terminal.write("\r" + Terminal.eraseLine, to: STDERR_FILENO)
        }
    }
}
