/// What a log line reports, as a typed fact beside its words (`LogEntry.event`): the
/// moments of an app's life around the daemon (launched for events, ended, given up on), of
/// a session's (opened, reattached), and of a finished download's name. Written by the one call that logs the moment and read
/// by whoever looks for it (tests, the benchmark), so that rewording a line changes no
/// reader. A value; made and read on any thread.
public struct LogEvent: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        /// The daemon launched `app` (pid `pid`) for a session's events.
        case launched
        /// The daemon could not start `app` (an executable) to deliver events.
        case launchFailed
        /// `app` (pid `pid`), launched for events, did not call its completion handler within
        /// its background budget; the daemon ended it.
        case budgetExpired
        /// `app` (pid `pid`), launched for events, exited, with `pending` events still undelivered.
        case launchedAppExited
        /// The daemon gave up relaunching `app` until the user launches it.
        case relaunchGivenUp
        /// The daemon will not relaunch `app` for the line's session's events (it was
        /// force-quit, or its relaunches were given up on); said once a wait.
        case relaunchLeftToUser
        /// The process `pid` opened the line's session in the daemon.
        case sessionOpened
        /// The library found its process launched for the line's session's events.
        case launchedForEvents
        /// The library woke its app again, in the same process, for the line's session's
        /// events that came after the app called its completion handler (S3.2).
        case wokenForEvents
        /// The library reopened the line's session in a daemon that had restarted.
        case reattached
        /// A request to the daemon failed with `code` (a `TransferFailure` code): logged by the
        /// library that asked, and by the daemon when it refuses one (with the asker's `pid`).
        case requestFailed
        /// The body of the line's task's finished download took its final name as the daemon
        /// loaded the session: the daemon had stopped between the event's commit and the rename.
        case finishedFileNamedAtLoad
        /// A finished download's body was gone when it was to take its final name (renamed
        /// already, or removed); the rename is not waited for.
        case finishedFileGone
        /// A crash mark (`Daemon/crashed-on`) was not counted against a task: forged, stale or unreadable.
        case crashMarkNotCounted
        /// A session with no delegate acknowledged its events undelivered, from the line's task
        /// on (S1.2); said once a session.
        case eventsWithoutDelegate
        /// The daemon closed the connection of process `pid`, which had held no session, watch
        /// or reply on its way for the idle deadline, `seconds` (after telling it -1001).
        case idleConnectionClosed
        /// A file of root certificates every app would trust installed none (`rootsRefusal`
        /// says why), read at the daemon's start or when the device's conditions changed.
        case deviceRootsRefused
    }

    public var kind: Kind
    /// The app's bundle family, or the executable for `launchFailed`.
    public var app: String?
    public var pid: Int32?
    /// The failure's code, for `requestFailed`.
    public var code: Int?
    /// The session's events still undelivered, for `launchedAppExited`.
    public var pending: Int?
    /// The deadline that ran out, for `idleConnectionClosed`.
    public var seconds: Int?
    /// Why a file of roots was refused and what it was, for `deviceRootsRefused`.
    public var rootsRefusal: RootsRefusal?

    public init(_ kind: Kind, app: String? = nil, pid: Int32? = nil, code: Int? = nil, pending: Int? = nil,
                seconds: Int? = nil, rootsRefusal: RootsRefusal? = nil) {
        self.kind = kind
        self.app = app
        self.pid = pid
        self.code = code
        self.pending = pending
        self.seconds = seconds
        self.rootsRefusal = rootsRefusal
    }
}
