/// The bytes of unfinished requests the daemon holds for a class of peers, across all of
/// them: capped, so that many connections each holding part of a frame cannot grow the
/// daemon. One account for peers that have not said who they are (nothing free: a hello is a
/// few hundred bytes), one for the others (each may hold `allowancePerConnection` of an
/// unfinished request uncounted, so that ordinary requests are never refused because of
/// what others hold; only what is beyond counts). Owned by the event loop.
final class InputAccount {
    /// Peers that have not said who they are hold at most this much in all, by default.
    static let defaultLimit = 8 << 20
    /// Identified peers' unfinished requests beyond their allowance, in all.
    static let identifiedLimit = 32 << 20
    /// What each identified peer may hold uncounted: more than any ordinary request.
    static let identifiedAllowance = 64 << 10
    let limit: Int
    let allowancePerConnection: Int
    private(set) var bytes = 0

    init(limit: Int = InputAccount.defaultLimit, allowancePerConnection: Int = 0) {
        self.limit = limit
        self.allowancePerConnection = allowancePerConnection
    }

    /// The account for peers whose hello was verified.
    static func identified() -> InputAccount {
        InputAccount(limit: identifiedLimit, allowancePerConnection: identifiedAllowance)
    }

    /// Counts `count` more bytes; false (and nothing counted) past the limit.
    func admit(_ count: Int) -> Bool {
        guard bytes + count <= limit else { return false }
        bytes += count
        return true
    }

    func release(_ count: Int) {
        bytes = max(0, bytes - count)
    }
}
