import Foundation

/// How the timeline looks: the colours, names and glyphs of lanes, waits and marks, and the
/// legend that explains them. Pure functions of the kinds; any thread.
extension TimelineRenderer {
    static func laneColor(_ kind: TimelineLane.Kind) -> String {
        switch kind {
        case .daemon: "#3b5bdb"
        case .appExtension: "#0c8599"
        case .relaunchedApp: "#9c36b5"
        case .userLaunchedApp: "#e8590c"
        case .tool: "#868e96"
        }
    }

    static func waitName(_ kind: TimelineWait.Kind) -> String {
        switch kind {
        case .earliestBeginDate: "earliestBeginDate"
        case .backoff: "backoff"
        case .retryAfter: "Retry-After"
        case .rateLimiter: "rate limiter"
        case .conditions: "conditions"
        case .discretionary: "discretionary"
        case .suspended: "suspended"
        case .daemonDown: "daemon lost"
        case .delivery: "awaiting delivery"
        case .unacknowledged: "not acknowledged"
        case .authentication: "credentials"
        case .slot: "transfer slot"
        case .other: "waiting"
        }
    }

    static func waitFill(_ kind: TimelineWait.Kind) -> String {
        switch kind {
        case .earliestBeginDate: "#a5d8ff"
        case .backoff: "#ffe066"
        case .retryAfter: "#ffc078"
        case .rateLimiter: "#ff922b"
        case .conditions: "#96f2d7"
        case .discretionary: "#b2f2bb"
        case .suspended: "#dee2e6"
        case .daemonDown: "url(#killed)"
        case .delivery: "#e5dbff"
        case .unacknowledged: "#f3d9fa"
        case .authentication: "#ffc9c9"
        case .slot: "#d0bfff"
        case .other: "#e9ecef"
        }
    }

    static func waitStroke(_ kind: TimelineWait.Kind) -> String {
        switch kind {
        case .daemonDown: "#e03131"
        case .delivery, .unacknowledged: "#9c36b5"
        default: "#868e96"
        }
    }

    static func markColor(_ kind: TimelineMark.Kind) -> String {
        switch kind {
        case .created, .resumed, .paused, .note: "#343a40"
        case .started: "#1c7ed6"
        case .retry: "#e67700"
        case .finished, .acknowledged: "#2b8a3e"
        case .failed, .killed: "#e03131"
        case .relaunch, .launched: "#9c36b5"
        case .delegate: "#1864ab"
        case .daemonStarted, .daemonStopped: "#3b5bdb"
        case .conditions: "#0c8599"
        }
    }

    /// Each kind of mark has its own shape, centred on (0, 0).
    static func glyph(_ kind: TimelineMark.Kind) -> String {
        let c = markColor(kind)
        switch kind {
        case .created: return "<circle r=\"5\" fill=\"#fff\" stroke=\"\(c)\" stroke-width=\"1.6\"/>"
        case .resumed: return "<circle r=\"3\" fill=\"\(c)\"/>"
        case .started: return "<path d=\"M-4 -6 L6 0 L-4 6 Z\" fill=\"\(c)\" stroke=\"#fff\" stroke-width=\"0.8\"/>"
        case .retry: return "<path d=\"M0 -6 L6 0 L0 6 L-6 0 Z\" fill=\"#ffd43b\" stroke=\"\(c)\" stroke-width=\"1.5\"/>"
        case .paused: return "<rect x=\"-4\" y=\"-5\" width=\"3\" height=\"10\" fill=\"\(c)\"/><rect x=\"1\" y=\"-5\" width=\"3\" height=\"10\" fill=\"\(c)\"/>"
        case .finished: return "<path d=\"M0 -7 L7 0 L0 7 L-7 0 Z\" fill=\"\(c)\" stroke=\"#fff\" stroke-width=\"1\"/>"
        case .failed, .killed: return "<path d=\"M-5 -5 L5 5 M5 -5 L-5 5\" stroke=\"\(c)\" stroke-width=\"3\" stroke-linecap=\"round\"/>"
        case .relaunch: return "<path d=\"M0 -8 L6 4 L-6 4 Z\" fill=\"\(c)\" stroke=\"#fff\" stroke-width=\"0.8\"/>"
        case .launched: return "<circle r=\"5\" fill=\"\(c)\" stroke=\"#fff\" stroke-width=\"1\"/>"
        case .delegate: return "<rect x=\"-3.5\" y=\"-3.5\" width=\"7\" height=\"7\" fill=\"\(c)\" stroke=\"#fff\" stroke-width=\"0.6\"/>"
        case .acknowledged: return "<circle r=\"6.5\" fill=\"\(c)\"/><path d=\"M-3.2 0.2 L-0.8 2.8 L3.4 -2.6\" stroke=\"#fff\" stroke-width=\"1.8\" fill=\"none\"/>"
        case .daemonStarted: return "<rect x=\"-4.5\" y=\"-4.5\" width=\"9\" height=\"9\" fill=\"#fff\" stroke=\"\(c)\" stroke-width=\"1.8\"/>"
        case .daemonStopped: return "<rect x=\"-4.5\" y=\"-4.5\" width=\"9\" height=\"9\" fill=\"\(c)\"/>"
        case .conditions: return "<path d=\"M0 -5 L5 0 L0 5 L-5 0 Z\" fill=\"#fff\" stroke=\"\(c)\" stroke-width=\"1.6\"/>"
        case .note: return "<circle r=\"2.5\" fill=\"\(c)\" opacity=\"0.7\"/>"
        }
    }

    static let patterns = """
    <defs>
    <pattern id="killed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffe3e3"/><line x1="0" y1="0" x2="0" y2="6" stroke="#fa5252" stroke-width="2"/></pattern>
    <pattern id="break" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(-30)"><rect width="8" height="8" fill="#f1f3f5"/><line x1="0" y1="0" x2="0" y2="8" stroke="#ced4da" stroke-width="2"/></pattern>
    </defs>

    """

    static var legend: String {
        func swatch(_ fill: String, _ stroke: String = "#868e96") -> String {
            "<svg width=\"22\" height=\"12\"><rect x=\"1\" y=\"1\" width=\"20\" height=\"10\" rx=\"2\" fill=\"\(fill)\" stroke=\"\(stroke)\"/></svg>"
        }
        func mark(_ kind: TimelineMark.Kind) -> String {
            "<svg width=\"18\" height=\"18\" viewBox=\"-9 -9 18 18\">\(glyph(kind))</svg>"
        }
        var items: [String] = []
        for kind in [TimelineLane.Kind.daemon, .appExtension, .relaunchedApp, .userLaunchedApp, .tool] {
            let name = switch kind {
            case .daemon: "transferd (one lane per pid)"
            case .appExtension: "extension"
            case .relaunchedApp: "app relaunched for events"
            case .userLaunchedApp: "app launched by the user"
            case .tool: "tool"
            }
            items.append(swatch(laneColor(kind) + "59", laneColor(kind)) + " " + name)
        }
        items.append(swatch("#bac8ff", "#4263eb") + " task, created → acknowledged")
        for kind in [TimelineWait.Kind.earliestBeginDate, .backoff, .retryAfter, .rateLimiter, .conditions, .discretionary, .slot, .daemonDown, .delivery, .unacknowledged] {
            let fill = kind == .daemonDown ? "#ffa8a8" : waitFill(kind)
            items.append(swatch(fill, waitStroke(kind)) + " " + escape(waitName(kind)))
        }
        let marks: [(TimelineMark.Kind, String)] = [(.created, "created"), (.resumed, "resume()"), (.started, "transfer started / resumed"), (.retry, "retry"),
                                                    (.paused, "paused"), (.finished, "finished"), (.failed, "failed / killed"), (.relaunch, "relaunch"),
                                                    (.launched, "launched for events"), (.delegate, "delegate call"), (.acknowledged, "acknowledged"),
                                                    (.daemonStarted, "daemon started"), (.daemonStopped, "daemon stops"), (.conditions, "conditions changed")]
        for (kind, name) in marks { items.append(mark(kind) + " " + name) }
        return "<div class=\"legend\">" + items.map { "<span>\($0)</span>" }.joined() + "</div>\n<p class=\"hint\">Hover a bar, a shaded stretch or a mark for the whole story; stretches with nothing logged are shortened (⋯).</p>\n"
    }
}
