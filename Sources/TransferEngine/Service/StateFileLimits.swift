/// How big each file the daemon reads from `Daemon/` may be: any program of the user can
/// write them, so each is read through `RootDirectory.read(_:limit:)` (no symlink followed,
/// nothing read past the bound) and refused, with a logged reason, when bigger. The README's
/// "Limits" gives the same numbers. Constants; any thread.
enum StateFileLimits {
    /// `transferd.run`: a pid, a boot id and a start time on one line.
    static let run = 256
    /// `crashed-on`: that line and a task's family, session identifier and number.
    static let crashMark = 2 << 10
    /// `trusted-roots.pem`: some hundreds of root certificates.
    static let trustedRoots = 1 << 20
    /// `conditions.json`: six fields.
    static let conditions = 64 << 10
    /// `apps.json`: every app and extension that said hello, its force-quit mark and relaunch failures.
    static let appRegistry = 16 << 20
}
