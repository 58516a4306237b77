import Foundation
import TransferCoding

/// Draws a `Timeline` as one self-contained HTML page: an inline SVG (processes above, tasks
/// below, one time axis), a legend, the findings, and the event list; no network, no external
/// script or font. A small inline script measures what the browser drew (lanes, bars, marks,
/// labels) and writes it as JSON into `#render-summary`, so a test can check the drawing.
struct TimelineRenderer {
    let timeline: Timeline

    static let width = 1360.0
    static let gutter = 280.0
    static let rightMargin = 28.0
    static let laneHeight = 42.0
    static let taskHeight = 58.0

    func html() -> String {
        var page = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <title>Background transfer timeline\(timeline.sessionFilter.map { " · \(Self.escape($0))" } ?? "")</title>
        <style>\(Self.style)</style></head><body>
        <h1>Background transfer timeline</h1>
        <p class="meta">container <code>\(Self.escape(timeline.container))</code>\(timeline.sessionFilter.map { " · session <code>\(Self.escape($0))</code>" } ?? "") · made \(Self.escape(ISO8601Format.string(from: timeline.generated)))</p>

        """
        let isEmpty = timeline.lanes.isEmpty && timeline.tasks.isEmpty
        if !timeline.hasLog {
            page += "<p class=\"empty\" id=\"no-log\">No log in this container: <code>\(Self.escape(timeline.logPath))</code> does not exist. Nothing has run here yet (every process writes to it), or the log was removed.</p>\n"
        } else if isEmpty {
            page += "<p class=\"empty\" id=\"no-entries\">The log <code>\(Self.escape(timeline.logPath))</code> has nothing to draw\(timeline.sessionFilter.map { " for session <code>\(Self.escape($0))</code>" } ?? "").</p>\n"
        }
        for note in timeline.notes { page += "<p class=\"note\">\(Self.escape(note))</p>\n" }
        if !timeline.findings.isEmpty {
            page += "<section id=\"findings\"><h2>Why the app has not been woken</h2><ul>\n"
            for finding in timeline.findings { page += "<li>\(Self.escape(finding))</li>\n" }
            page += "</ul></section>\n"
        }
        if !isEmpty {
            page += Self.legend
            page += "<div class=\"chart\">\n" + svg() + "\n</div>\n"
            page += eventList()
        }
        page += "<pre id=\"render-summary\" hidden></pre>\n<script>\(Self.measuringScript)</script>\n</body></html>\n"
        return page
    }

    // MARK: The drawing

    private func svg() -> String {
        let moments = timeline.lanes.flatMap { [$0.start, $0.end] } + timeline.tasks.flatMap { [$0.start, $0.end] }
            + timeline.marks.map(\.time) + timeline.waits.flatMap { [$0.start, $0.end] }
        let x0 = Self.gutter
        let scale = TimelineScale(moments: moments, x0: x0, width: Self.width - Self.gutter - Self.rightMargin)
        let right = Self.width - Self.rightMargin
        let axisY = 34.0
        let lanesTop = axisY + 30
        let tasksTop = lanesTop + Double(timeline.lanes.count) * Self.laneHeight + 30
        let height = tasksTop + Double(timeline.tasks.count) * Self.taskHeight + 16
        var out = "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Self.n(Self.width))\" height=\"\(Self.n(height))\" viewBox=\"0 0 \(Self.n(Self.width)) \(Self.n(height))\" font-family=\"DejaVu Sans, Liberation Sans, Arial, sans-serif\" font-size=\"11\">\n"
        out += Self.patterns

        // Axis, grid and breaks.
        out += "<g class=\"axis\">\n"
        out += "<text x=\"8\" y=\"\(Self.n(axisY - 14))\" class=\"axis-origin\">0 s = \(Self.escape(TimelineBuilder.clock(scale.origin)))</text>\n"
        out += "<line x1=\"\(Self.n(x0))\" y1=\"\(Self.n(axisY))\" x2=\"\(Self.n(right))\" y2=\"\(Self.n(axisY))\" stroke=\"#495057\"/>\n"
        for tick in scale.ticks() {
            let x = scale.x(tick)
            out += "<line class=\"grid\" x1=\"\(Self.n(x))\" y1=\"\(Self.n(axisY))\" x2=\"\(Self.n(x))\" y2=\"\(Self.n(height - 10))\" stroke=\"#e9ecef\"/>"
            out += "<line x1=\"\(Self.n(x))\" y1=\"\(Self.n(axisY - 5))\" x2=\"\(Self.n(x))\" y2=\"\(Self.n(axisY))\" stroke=\"#495057\"/>"
            out += "<text class=\"tick\" x=\"\(Self.n(x))\" y=\"\(Self.n(axisY - 9))\" text-anchor=\"middle\">\(Self.escape(scale.label(tick)))<title>\(Self.escape(TimelineBuilder.clock(tick)))</title></text>\n"
        }
        for piece in scale.pieces where piece.isBreak {
            let gap = piece.to.timeIntervalSince(piece.from)
            out += "<g class=\"break\"><rect x=\"\(Self.n(piece.x0))\" y=\"\(Self.n(axisY))\" width=\"\(Self.n(piece.x1 - piece.x0))\" height=\"\(Self.n(height - axisY - 10))\" fill=\"url(#break)\" opacity=\"0.6\"/>"
            out += "<text x=\"\(Self.n((piece.x0 + piece.x1) / 2))\" y=\"\(Self.n(axisY + 14))\" text-anchor=\"middle\" fill=\"#868e96\">⋯</text>"
            out += "<title>\(Self.escape("\(Self.duration(gap)) with nothing logged, shortened (\(TimelineBuilder.clock(piece.from)) → \(TimelineBuilder.clock(piece.to)))"))</title></g>\n"
        }
        out += "</g>\n"

        // Section headings.
        out += "<text class=\"section\" x=\"8\" y=\"\(Self.n(lanesTop - 10))\">Processes</text>\n"
        out += "<text class=\"section\" x=\"8\" y=\"\(Self.n(tasksTop - 10))\">Tasks</text>\n"

        // Guides: relaunches and daemon deaths, across everything.
        for mark in timeline.marks where mark.task == nil && (mark.kind == .relaunch || mark.kind == .killed) {
            let x = scale.x(mark.time)
            let color = mark.kind == .relaunch ? "#ae3ec9" : "#e03131"
            out += "<line class=\"guide\" data-kind=\"\(mark.kind.rawValue)\" x1=\"\(Self.n(x))\" y1=\"\(Self.n(lanesTop - 4))\" x2=\"\(Self.n(x))\" y2=\"\(Self.n(height - 10))\" stroke=\"\(color)\" stroke-dasharray=\"4 3\" opacity=\"0.55\"><title>\(Self.escape(mark.detail))</title></line>\n"
        }

        // Now, when something is still pending: the picture's right edge is not the end of the story.
        if timeline.tasks.contains(where: \.open) || timeline.lanes.contains(where: \.stillRunning) {
            let x = scale.x(timeline.generated)
            out += "<g class=\"now\"><line x1=\"\(Self.n(x))\" y1=\"\(Self.n(axisY))\" x2=\"\(Self.n(x))\" y2=\"\(Self.n(height - 10))\" stroke=\"#212529\" stroke-dasharray=\"2 3\"/>"
            out += "<text class=\"tick\" x=\"\(Self.n(x - 4))\" y=\"\(Self.n(lanesTop - 10))\" text-anchor=\"end\" font-weight=\"bold\">now</text><title>\(Self.escape("the page was made at \(TimelineBuilder.clock(timeline.generated))"))</title></g>\n"
        }

        // Lanes.
        for (index, lane) in timeline.lanes.enumerated() {
            let y = lanesTop + Double(index) * Self.laneHeight
            let color = Self.laneColor(lane.kind)
            let xs = scale.x(lane.start), xe = max(scale.x(lane.end), xs + 4)
            out += "<g class=\"lane\" data-lane=\"\(Self.escape(lane.id))\" data-kind=\"\(lane.kind.rawValue)\" data-process=\"\(Self.escape(lane.process))\" data-pid=\"\(lane.pid)\" data-start=\"\(Self.escape(ISO8601Format.string(from: lane.start)))\">\n"
            if index % 2 == 0 { out += "<rect x=\"0\" y=\"\(Self.n(y))\" width=\"\(Self.n(Self.width))\" height=\"\(Self.n(Self.laneHeight))\" fill=\"#f8f9fa\"/>" }
            out += Self.gutterText(lane.title, second: lane.ending, y: y + 15, color: color)
            out += "<rect class=\"span\" x=\"\(Self.n(xs))\" y=\"\(Self.n(y + 6))\" width=\"\(Self.n(xe - xs))\" height=\"12\" rx=\"3\" fill=\"\(color)\" fill-opacity=\"0.35\" stroke=\"\(color)\"><title>\(Self.escape("\(lane.title)\n\(TimelineBuilder.clock(lane.start)) → \(TimelineBuilder.clock(lane.end)): \(lane.ending)"))</title></rect>\n"
            if let diedBy = lane.diedBy, diedBy > lane.end {
                let xd = scale.x(diedBy)
                out += "<rect class=\"lost\" x=\"\(Self.n(xe))\" y=\"\(Self.n(y + 8))\" width=\"\(Self.n(max(xd - xe, 1)))\" height=\"8\" fill=\"url(#killed)\" opacity=\"0.7\"><title>\(Self.escape("\(lane.title) died somewhere in here: \(lane.ending)"))</title></rect>"
            }
            if lane.stillRunning { out += "<path d=\"M\(Self.n(xe)) \(Self.n(y + 6)) l6 6 l-6 6 z\" fill=\"\(color)\"/>" }
            // What happened in this process about a task (a delegate call, a resume) is drawn
            // here too, small and unlabelled; the task's row tells it in full.
            for mark in timeline.marks where mark.task != nil && mark.lane == lane.id && mark.kind != .relaunch && mark.kind != .killed {
                out += "<g class=\"echo\" data-kind=\"\(mark.kind.rawValue)\" transform=\"translate(\(Self.n(scale.x(mark.time))) \(Self.n(y + 12))) scale(0.75)\">\(Self.glyph(mark.kind))<title>\(Self.escape("\(TimelineBuilder.clock(mark.time)) · \(mark.detail)"))</title></g>"
            }
            let marks = timeline.marks.filter { $0.task == nil && $0.lane == lane.id }
            out += drawMarks(marks, scale: scale, glyphY: y + 12, labelY: y + 31, rowHeight: 11)
            out += "</g>\n"
        }

        // Tasks.
        for (index, task) in timeline.tasks.enumerated() {
            let y = tasksTop + Double(index) * Self.taskHeight
            let xs = scale.x(task.start), xe = max(scale.x(task.end), xs + 4)
            out += "<g class=\"task\" data-task=\"\(Self.escape(task.key.id))\" data-open=\"\(task.open)\">\n"
            if index % 2 == 0 { out += "<rect x=\"0\" y=\"\(Self.n(y))\" width=\"\(Self.n(Self.width))\" height=\"\(Self.n(Self.taskHeight))\" fill=\"#f8f9fa\"/>" }
            out += Self.gutterText("task \(task.key.task) · \(task.name)", second: task.key.session, y: y + 17, color: "#212529")
            let summary = "task \(task.key.task) of \(task.key.session): \(task.kind) \(task.url)\n\(TimelineBuilder.clock(task.start)) → \(task.open ? "now" : TimelineBuilder.clock(task.end)): \(task.outcome)"
            out += "<rect class=\"bar\" x=\"\(Self.n(xs))\" y=\"\(Self.n(y + 8))\" width=\"\(Self.n(xe - xs))\" height=\"16\" rx=\"3\" fill=\"#bac8ff\" stroke=\"#4263eb\"><title>\(Self.escape(summary))</title></rect>\n"
            let markXs = timeline.marks.filter { $0.task == task.key }.map { scale.x($0.time) }
            for wait in timeline.waits where wait.task == task.key {
                let ws = scale.x(wait.start), we = max(scale.x(wait.end), ws + 2)
                out += "<rect class=\"wait\" data-kind=\"\(wait.kind.rawValue)\" x=\"\(Self.n(ws))\" y=\"\(Self.n(y + 8))\" width=\"\(Self.n(we - ws))\" height=\"16\" fill=\"\(Self.waitFill(wait.kind))\" stroke=\"\(Self.waitStroke(wait.kind))\" stroke-width=\"0.8\"><title>\(Self.escape("\(Self.waitName(wait.kind)) \(TimelineBuilder.clock(wait.start)) → \(wait.open ? "now" : TimelineBuilder.clock(wait.end)) (\(Self.duration(wait.end.timeIntervalSince(wait.start)))): \(wait.reason)"))</title></rect>"
                let name = Self.waitName(wait.kind)
                // Named inside when it fits and no mark's glyph sits on the name.
                let half = Self.textWidth(name, size: 10) / 2 + 8
                if we - ws > 2 * half, !markXs.contains(where: { abs($0 - (ws + we) / 2) < half }) {
                    out += "<text class=\"wait-label\" x=\"\(Self.n((ws + we) / 2))\" y=\"\(Self.n(y + 20))\" text-anchor=\"middle\" font-size=\"10\" fill=\"#212529\" pointer-events=\"none\">\(Self.escape(name))</text>"
                }
                out += "\n"
            }
            if task.open { out += "<path d=\"M\(Self.n(xe)) \(Self.n(y + 8)) l7 8 l-7 8 z\" fill=\"#4263eb\"><title>still pending now</title></path>" }
            let marks = timeline.marks.filter { $0.task == task.key }
            out += drawMarks(marks, scale: scale, glyphY: y + 16, labelY: y + 37, rowHeight: 12)
            out += "</g>\n"
        }
        out += "</svg>"
        return out
    }

    /// The glyphs of a row's marks, and their labels on up to two lines below, the most
    /// telling first; a label that would overlap another is left to the tooltip.
    private func drawMarks(_ marks: [TimelineMark], scale: TimelineScale, glyphY: Double, labelY: Double, rowHeight: Double) -> String {
        var out = ""
        var tiers: [[(Double, Double)]] = [[], []]
        let ranked = marks.enumerated().sorted { (Self.priority($0.element.kind), $0.offset) < (Self.priority($1.element.kind), $1.offset) }.map(\.element)
        var labels = ""
        for mark in ranked where !mark.label.isEmpty {
            let x = scale.x(mark.time)
            let w = Self.textWidth(mark.label, size: 10)
            let span = (x - w / 2 - 5, x + w / 2 + 5)
            guard span.0 >= Self.gutter - 2 || x > Self.gutter + 4 else { continue }
            for tier in 0..<tiers.count where !tiers[tier].contains(where: { $0.0 < span.1 && span.0 < $0.1 }) {
                tiers[tier].append(span)
                // (Kept inside the picture with room to spare: the real text may be wider than estimated.)
                let clampedX = min(max(x, Self.gutter + w * 0.6), Self.width - 6 - w * 0.6)
                labels += "<text class=\"label\" data-kind=\"\(mark.kind.rawValue)\" x=\"\(Self.n(clampedX))\" y=\"\(Self.n(labelY + Double(tier) * rowHeight))\" text-anchor=\"middle\" font-size=\"10\" fill=\"\(Self.markColor(mark.kind))\">\(Self.escape(mark.label))</text>"
                break
            }
        }
        for mark in marks {
            let x = scale.x(mark.time)
            var attributes = "class=\"mark\" data-kind=\"\(mark.kind.rawValue)\" data-time=\"\(Self.escape(ISO8601Format.string(from: mark.time)))\""
            if let lane = mark.lane { attributes += " data-lane=\"\(Self.escape(lane))\"" }
            if let task = mark.task { attributes += " data-task=\"\(Self.escape(task.id))\"" }
            out += "<g \(attributes) transform=\"translate(\(Self.n(x)) \(Self.n(glyphY)))\">\(Self.glyph(mark.kind))<title>\(Self.escape("\(TimelineBuilder.clock(mark.time)) · \(mark.detail)"))</title></g>"
        }
        return out + "\n" + labels + "\n"
    }

    private static func gutterText(_ first: String, second: String, y: Double, color: String) -> String {
        let limit = gutter - 16
        return "<text class=\"name\" x=\"8\" y=\"\(n(y))\" font-weight=\"bold\" fill=\"\(color)\">\(escape(fit(first, width: limit, size: 11)))<title>\(escape(first))</title></text>"
            + "<text class=\"subname\" x=\"8\" y=\"\(n(y + 13))\" font-size=\"10\" fill=\"#868e96\">\(escape(fit(second, width: limit, size: 10)))<title>\(escape(second))</title></text>"
    }

    /// Cuts `text` (with an ellipsis) to about `width` pixels.
    static func fit(_ text: String, width: Double, size: Double) -> String {
        guard textWidth(text, size: size) > width else { return text }
        let keep = max(Int(width / (size * 0.6)) - 1, 4)
        return String(text.prefix(keep)) + "…"
    }

    /// An estimate of a label's width (DejaVu/Liberation Sans average about 0.6 em).
    static func textWidth(_ text: String, size: Double) -> Double { Double(text.count) * size * 0.64 }

    private static func priority(_ kind: TimelineMark.Kind) -> Int {
        switch kind {
        case .killed: 0
        case .relaunch: 1
        case .acknowledged: 2
        case .launched: 3
        case .failed, .finished: 4
        case .retry: 5
        case .daemonStarted, .daemonStopped: 6
        case .started: 7
        case .created: 8
        case .paused: 9
        case .delegate: 10
        case .resumed: 11
        case .conditions, .note: 12
        }
    }

    // MARK: Text

    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// A coordinate with at most one decimal.
    static func n(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    static func duration(_ seconds: TimeInterval) -> String {
        if seconds < 1 { return String(format: "%.0f ms", seconds * 1000) }
        if seconds < 60 { return String(format: "%.2f s", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return "\(whole / 60) min \(whole % 60) s" }
        return "\(whole / 3600) h \(whole / 60 % 60) min"
    }
}
