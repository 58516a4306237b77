import Foundation
import TransferTransport

extension TransferDaemon {
    /// The cookie store `session`'s transfers send from and store into (S9.4): its app
    /// group's, or its owner's own, per the configuration it was opened with; nil when it has
    /// none. Problems with the file are logged against the session; they never fail a task.
    /// On the event loop, as every transfer is started there.
    func cookieJar(for session: DaemonSession) -> CookieJar? {
        guard let settings = session.record.configuration.cookies else { return nil }
        let path = layout.cookieJar(settings, owner: session.record.owner).path
        let log = self.log, name = session.key.identifier.rawValue
        return CookieJar(path: path, root: root) { problem in log.error("cookies", problem, session: name) }
    }
}
