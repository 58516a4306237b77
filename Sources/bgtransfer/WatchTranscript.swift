import Foundation
import TransferContainer
import ProgressDisplay

/// `bgtransfer watch` when stdout is not a terminal: nothing animated, one plain line when a
/// task starts (is first seen running) and one when it finishes (is no longer running:
/// completed, failed, cancelled or suspended; the daemon does not say which, and the last
/// bytes seen may be short of the end, so that line names the task only), flushed at once
/// for whoever reads the pipe.
/// Owned by the main thread.
final class WatchTranscript: WatchDisplay {
    /// The tasks seen running at the last push, by `family/session/task`, as last seen.
    private var running: [String: TransferStatus] = [:]

    init() {
        InterruptExit.install(writing: "")
    }

    /// `<session>/<task> <kind> <name>`.
    static func title(_ status: TransferStatus) -> String {
        "\(status.name) \(status.kind.rawValue) \(ProgressLine.taskName(description: status.taskDescription, url: status.url))"
    }

    /// The title, `<done> / <expected>`, and why it waits if it does.
    static func line(_ status: TransferStatus) -> String {
        var text = "\(title(status)) \(ProgressFormat.bytes(status.bytesDone)) / \(ProgressFormat.bytes(status.bytesExpected))"
        if !status.isTransferring {
            text += status.retryCount > 0 ? " waiting (retry \(status.retryCount))" : " waiting"
            if let reason = status.waitingFor { text += ": \(reason)" }
        }
        return text
    }

    func show(_ statuses: [TransferStatus]) {
        let now = Dictionary(statuses.map { ($0.key, $0) }) { first, _ in first }
        var lines: [String] = []
        for status in statuses where running[status.key] == nil { lines.append("started " + Self.line(status)) }
        for (key, status) in running.sorted(by: { $0.key < $1.key }) where now[key] == nil { lines.append("finished " + Self.title(status)) }
        running = now
        guard !lines.isEmpty else { return }
        print(lines.joined(separator: "\n"))
        fflush(nil) // read through a pipe, lines must not wait in a buffer
    }

    func daemonNotRunning() {
        FileHandle.standardError.write(Data("bgtransfer: transferd is not running; waiting for it\n".utf8))
    }

    func stop() {}
}
