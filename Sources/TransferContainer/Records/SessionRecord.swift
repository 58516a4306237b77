import Foundation

/// The configuration a background session was opened with, as the daemon keeps it (S1.8:
/// a reopened session goes on with the configuration its tasks started with).
public struct SessionConfiguration: Codable, Sendable, Equatable {
    public var sharedContainerIdentifier: BundleIdentifier?
    public var sessionSendsLaunchEvents: Bool = true
    public var isDiscretionary: Bool = false
    public var allowsCellularAccess: Bool = true
    public var allowsExpensiveNetworkAccess: Bool = true
    public var allowsConstrainedNetworkAccess: Bool = true
    public var timeoutIntervalForRequest: Double = 60
    public var timeoutIntervalForResource: Double = 7 * 24 * 3600
    public var httpMaximumConnectionsPerHost: Int = 6
    public var httpAdditionalHeaders: [String: String]?

    public init() {}
}

/// `Sessions/<family>/<identifier>/session.json`: one background session as the daemon
/// knows it. Written by the daemon only.
public struct SessionRecord: Codable, Sendable, Equatable {
    public static let currentVersion = 1

    public var version: Int = SessionRecord.currentVersion
    public var identifier: SessionIdentifier
    /// The bundle that created the session (an app or one of its extensions).
    public var owner: BundleIdentifier
    /// The containing app: the namespace the identifier is unique in.
    public var family: BundleIdentifier
    public var configuration: SessionConfiguration
    public var createdAt: Date
    /// Lower bounds for the next numbers handed out, kept so that numbers are never reused
    /// after the records that used them were deleted (S7.1).
    public var nextTaskIdentifier: Int = 1
    public var nextEventNumber: UInt64 = 1

    public init(identifier: SessionIdentifier, owner: BundleIdentifier, family: BundleIdentifier, configuration: SessionConfiguration, createdAt: Date = Date()) {
        self.identifier = identifier
        self.owner = owner
        self.family = family
        self.configuration = configuration
        self.createdAt = createdAt
    }
}
