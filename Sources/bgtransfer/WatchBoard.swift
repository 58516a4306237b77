import Foundation
import TransferContainer
import ProgressDisplay

/// `bgtransfer watch` on a terminal: under each session's identifier a progress bar per
/// running task, redrawn in place at every push (about four times a second), fitted to the
/// terminal's width and height; rates are smoothed over the last few seconds. The cursor is
/// hidden while it draws and shown again on Ctrl-C (`InterruptExit`). Owned by the main thread.
final class WatchBoard: WatchDisplay {
    private var rates: [String: TransferRate] = [:]
    /// Lines drawn last time: the next redraw starts that many lines up.
    private var drawnLines = 0

    init() {
        Terminal.write(Terminal.hideCursor, to: STDOUT_FILENO)
        InterruptExit.install(writing: Terminal.showCursor)
    }

    func show(_ statuses: [TransferStatus]) {
        let now = ProcessInfo.processInfo.systemUptime
        var seen: [String: TransferRate] = [:]
        for status in statuses {
            var rate = rates[status.key] ?? TransferRate()
            rate.add(bytes: status.bytesDone, at: now)
            seen[status.key] = rate
        }
        rates = seen
        let size = Terminal.size(STDOUT_FILENO)
        draw(statuses.isEmpty ? ["no transfers running"] : lines(statuses, width: size.columns - 1, height: size.rows - 1))
    }

    func daemonNotRunning() {
        rates.removeAll()
        draw(["transferd is not running; waiting for it (Ctrl-C to stop)"])
    }

    func stop() {
        Terminal.write(Terminal.showCursor, to: STDOUT_FILENO)
    }

    /// A line per session, then its tasks' bars; at most `height` lines. Lines stay one short
    /// of the terminal's width: a line that wraps would throw the redraw's count off.
    private func lines(_ statuses: [TransferStatus], width: Int, height: Int) -> [String] {
        let labels = statuses.map { status in
            "  #\(status.taskIdentifier) \(ProgressLine.taskName(description: status.taskDescription, url: status.url))\(status.kind == .upload ? " (upload)" : "")"
        }
        // One column for the bars, unless a label would take more than a third of the line.
        let labelWidth = min(labels.map(\.count).max() ?? 0, width / 3)
        var lines: [String] = []
        var session: String?
        for (status, label) in zip(statuses, labels) {
            let sessionKey = "\(status.family)/\(status.session)"
            if sessionKey != session {
                lines.append(ProgressLine.shorten(status.session.rawValue, to: width))
                session = sessionKey
            }
            let waiting = status.isTransferring ? nil : (status.retryCount > 0 ? "waiting (retry \(status.retryCount))" : "waiting")
            let progress = ProgressLine(label: label, done: status.bytesDone, expected: status.bytesExpected, bytesPerSecond: rates[status.key]?.bytesPerSecond, waiting: waiting)
            lines.append(progress.render(width: width, labelWidth: labelWidth))
        }
        guard lines.count > max(1, height) else { return lines }
        let shown = max(1, height) - 1
        return Array(lines.prefix(shown)) + ["… \(lines.count - shown) more lines (a taller terminal shows them)"]
    }

    /// Redraws over what was drawn last time; what is left below it is erased.
    private func draw(_ lines: [String]) {
        var text = Terminal.up(drawnLines)
        for line in lines { text += Terminal.eraseLine + line + "\n" }
        Terminal.write(text + Terminal.eraseBelow, to: STDOUT_FILENO)
        drawnLines = lines.count
    }
}
