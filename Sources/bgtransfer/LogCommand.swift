import Foundation
import TransferContainer
import ContainerInspection
import TransferLogging
import TransferCoding

/// `bgtransfer log [--follow] [--session ID] [--level debug|info|notice|error]`: the container's
/// log as a person reads it, one line per entry, from every process.
enum LogCommand {
    static func run(layout: ContainerLayout, arguments: [String]) {
        var follow = false
        var session: String?
        var level = LogLevel.notice
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--follow", "-f": follow = true
            case "--session":
                guard let value = rest.popFirst() else { Tool.fail("--session needs an identifier", status: 64) }
                session = value
            case "--level":
                guard let value = rest.popFirst(), let parsed = LogLevel(rawValue: value) else { Tool.fail("--level takes debug, info, notice, error or fault", status: 64) }
                level = parsed
            default: Tool.fail("log: unknown option \(option)", status: 64)
            }
        }
        let keep = { (entry: LogEntry) in entry.level >= level && (session == nil || entry.session == session) }
        var follower = LogFollower(layout: layout, fromStart: true)
        for entry in follower.next() where keep(entry) { print(line(entry)) }
        guard follow else { return }
        fflush(nil) // followed through a pipe or into a file, the lines so far must not wait in a buffer
        while true {
            for entry in follower.next() where keep(entry) {
                print(line(entry))
                fflush(nil) // followed through a pipe, lines must not wait in a buffer
            }
            usleep(100_000)
        }
    }

    static func line(_ entry: LogEntry) -> String {
        var text = "\(ISO8601Format.string(from: entry.time)) \(entry.process)[\(entry.pid)] \(entry.level.rawValue) \(entry.subsystem).\(entry.category)"
        if let session = entry.session { text += " [\(session)\(entry.task.map { " task \($0)" } ?? "")]" }
        return text + ": " + entry.message
    }
}
