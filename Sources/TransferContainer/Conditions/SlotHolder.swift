/// One session that holds transfer slots while other tasks wait for one: whom a task waiting
/// for a slot waits behind (`TaskHold.waitingForSlot`). A value type; any thread.
public struct SlotHolder: Codable, Sendable, Equatable, CustomStringConvertible {
    /// The app family (its bundle identifier) and the session.
    public var family: String
    public var session: String
    /// Transfers the session runs now.
    public var transfers: Int

    public init(family: String, session: String, transfers: Int) {
        self.family = family
        self.session = session
        self.transfers = transfers
    }

    public var description: String { "\(family)/\(session) (\(transfers))" }
}
