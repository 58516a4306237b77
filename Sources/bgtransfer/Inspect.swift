import Foundation
import TransferContainer
import ProgressDisplay
import ContainerInspection
import TransferCoding

/// `bgtransfer inspect [--json] [--session ID]`: the container as a person (or a script) reads it.
enum Inspect {
    static func run(layout: ContainerLayout, arguments: [String]) {
        var json = false
        var session: String?
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--json": json = true
            case "--session":
                guard let value = rest.popFirst() else { Tool.fail("--session needs an identifier", status: 64) }
                session = value
            default: Tool.fail("inspect: unknown option \(option)", status: 64)
            }
        }
        var snapshot = ContainerSnapshot.read(layout, sessionFilter: session)
        DaemonWaits.overlay(on: &snapshot, layout: layout)
        if json {
            let data = (try? RecordCoding.encoder().encode(snapshot)) ?? Data()
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(text(snapshot))
        }
    }

    static func text(_ snapshot: ContainerSnapshot) -> String {
        var lines = ["container \(snapshot.container)"]
        lines.append("daemon: " + (snapshot.daemon.running ? "running (pid \(snapshot.daemon.pid.map(String.init) ?? "?"))" : "not running"))
        lines.append("conditions: \(snapshot.conditions)")
        lines.append("apps:")
        if snapshot.apps.isEmpty { lines.append("  (none registered)") }
        for app in snapshot.apps {
            var line = "  \(app.bundleIdentifier) [\(app.kind)] in \(app.containingApp), groups \(app.appGroups.joined(separator: ", ")), \(app.executable ?? "?")"
            if app.forceQuit { line += ", force-quit (no relaunch until the user launches it)" }
            if app.relaunchGivenUp { line += ", relaunching given up after \(app.failedRelaunches) failed relaunches (none until the user launches it)" }
            if let delay = app.relaunchDelay { line += String(format: ", relaunch delay %.2f s", delay) }
            lines.append(line)
        }
        lines.append("sessions:")
        if snapshot.sessions.isEmpty { lines.append("  (none)") }
        for session in snapshot.sessions {
            let holder = session.holderPID.map { "held by pid \($0)" } ?? "not held"
            lines.append("  \(session.identifier) (owner \(session.owner), \(holder), group \(session.configuration.sharedContainerIdentifier?.rawValue ?? "none"))")
            if session.openedWithoutDelegate {
                lines.append("    opened without a delegate: its events are acknowledged undelivered (S1.2)")
            }
            for task in session.tasks {
                let (done, expected) = task.progressBytes
                var line = "    task \(task.taskIdentifier) \(task.kind.rawValue) \(task.state.name) \(task.originalRequest.url) \(ProgressFormat.bytes(done))/\(ProgressFormat.bytes(expected)) priority \(task.priority)"
                if let description = task.taskDescription { line += " \"\(description)\"" }
                if task.requirements.isDiscretionary { line += " discretionary" }
                if let waiting = session.waiting[String(task.taskIdentifier)] { line += " [\(waiting)]" }
                if task.retryCount > 0 { line += " retries \(task.retryCount)" }
                if let error = task.lastError { line += " last error: \(error)" }
                lines.append(line)
            }
            for event in session.pendingEvents {
                let outcome = event.error.map { "error \($0.code) \($0.message)" } ?? "HTTP \(event.statusCode.map(String.init) ?? "-")"
                lines.append("    pending event \(event.number): task \(event.taskIdentifier) completed, \(outcome)")
            }
            if let wait = session.deliveryWait { lines.append("    (\(session.pendingEvents.count) pending: \(wait))") }
            for record in session.unreadableRecords { lines.append("    unreadable record \(record)") }
        }
        lines.append("app groups:")
        for group in snapshot.appGroups {
            lines.append("  \(group.identifier): \(group.files.count) files")
            for file in group.files { lines.append("    \(file.path) \(ProgressFormat.bytes(file.size))") }
        }
        return lines.joined(separator: "\n")
    }
}
