import Foundation
import TransferTransport

extension TransferDaemon {
    /// The cookie store `session`'s transfers send from and store into (S9.4): its app
    /// group's, or its owner's own, per the configuration it was opened with; nil when it has
    /// none. Problems with the file are logged against the session; they never fail a task.
    /// On the event loop, as every transfer is started there.
    /// The jar is made once per session and settings (its path is built from URLs, once per
    /// transfer before); the file itself is read by every transfer, as others write it.
    func cookieJar(for session: DaemonSession) -> CookieJar? {
        guard let settings = session.record.configuration.cookies else { return nil }
        let owner = session.record.owner
        if let made = session.cookieJar, made.settings == settings, made.owner == owner { return made.jar }
        let path = layout.cookieJar(settings, owner: owner).path
        let log = self.log, name = session.key.identifier.rawValue
        let jar = CookieJar(path: path, root: root) { problem in log.error("cookies", problem, session: name) }
        session.cookieJar = (settings, owner, jar)
        return jar
    }
}
