/// A session in the daemon's namespace: the app family and the identifier (S1.1). Two
/// families may use the same identifier without meeting.
public struct SessionKey: Hashable, Sendable, CustomStringConvertible {
    public var family: BundleIdentifier
    public var identifier: SessionIdentifier
    public var description: String { "\(family)/\(identifier)" }

    public init(family: BundleIdentifier, identifier: SessionIdentifier) {
        self.family = family
        self.identifier = identifier
    }
}
