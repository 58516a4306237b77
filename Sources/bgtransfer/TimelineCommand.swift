import Foundation
import TransferContainer
import ContainerInspection
import TransferLogging

/// `bgtransfer timeline [--session ID] [--output FILE]`: the container's story as one
/// self-contained HTML page (see `TimelineBuilder` for what is drawn from where, and
/// `TimelineRenderer` for the drawing); stdout unless `--output` names a file.
enum TimelineCommand {
    static func run(layout: ContainerLayout, arguments: [String]) {
        var session: String?
        var output: String?
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--session":
                guard let value = rest.popFirst(), !value.hasPrefix("--") else { Tool.fail("timeline: --session needs a session identifier", status: 64) }
                session = value
            case "--output", "-o":
                guard let value = rest.popFirst(), !value.isEmpty else { Tool.fail("timeline: --output needs a file path", status: 64) }
                output = value
            default: Tool.fail("timeline: unknown option \(option) (usage: bgtransfer [--container PATH] timeline [--session ID] [--output FILE])", status: 64)
            }
        }
        let logPath = layout.logFile.path
        let fm = FileManager.default
        let hasLog = fm.fileExists(atPath: logPath)
        if hasLog, !fm.isReadableFile(atPath: logPath) { Tool.fail("timeline: cannot read the log \(logPath)", status: 66) }
        let entries = hasLog ? TransferLog.entries(layout: layout) : []
        var snapshot = ContainerSnapshot.read(layout)
        DaemonWaits.overlay(on: &snapshot, layout: layout)
        if let session, !entries.contains(where: { $0.session == session }), !snapshot.sessions.contains(where: { $0.identifier == session }) {
            Tool.fail("timeline: no session \(session) in the container \(layout.root.path) (neither its log nor Sessions/ name it)", status: 1)
        }
        let builder = TimelineBuilder(layout: layout, sessionFilter: session)
        let timeline = builder.build(entries: entries, hasLog: hasLog, snapshot: snapshot, journal: .read(layout))
        let page = Data(TimelineRenderer(timeline: timeline).html().utf8)
        guard let output else {
            FileHandle.standardOutput.write(page)
            return
        }
        let url = URL(fileURLWithPath: output)
        do {
            try page.write(to: url, options: .atomic)
        } catch {
            Tool.fail("timeline: cannot write \(url.path): \((error as NSError).localizedDescription)", status: 73)
        }
    }
}
