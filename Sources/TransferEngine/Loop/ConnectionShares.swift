import Foundation

/// How the daemon's connections are shared between apps (issue 45: one program held 1,856
/// of 1,856 and every other app was refused). An app (an app with its extensions, or one
/// program) holds at most `perApp`; apps that hold one already hold together at most
/// `maximum - reserve`, so that an app holding none can always say hello; and an identified
/// connection that holds nothing (no session, no watch, no reply on its way) for
/// `idleTimeout` is closed. Past any of them the peer gets -1011, or -1001 for the idle one.
struct ConnectionShares {
    /// Connections served at once (`ClientServer.maximumConnections`).
    let maximum: Int

    /// One eighth of the connections, and at least 8: an app is a few processes, each with
    /// one connection, and a developer tool or two.
    var perApp: Int { max(8, maximum / 8) }

    /// One sixteenth, and at least 4, kept for apps holding none.
    var reserve: Int { max(4, maximum / 16) }

    /// How long an identified connection may hold nothing before it is closed, by default.
    static let idleTimeout: TimeInterval = 60

    /// Why the hello of `app`, which holds `held` of the `identified` connections that said
    /// who they are, is refused; nil when it is welcome.
    func refusal(app: String, held: Int, identified: Int) -> String? {
        if held >= perApp {
            return "\(app) holds \(held) connections to transferd, the most one app may hold "
                + "(\(perApp) of \(maximum)); close one first"
        }
        if held > 0 && identified >= maximum - reserve {
            return "transferd keeps its last \(reserve) of \(maximum) connections for apps that hold none, "
                + "and \(app) holds \(held)"
        }
        return nil
    }
}
