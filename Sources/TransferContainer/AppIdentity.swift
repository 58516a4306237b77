import Foundation

/// Who a process is: its bundle, whether it is an app or an app extension, its containing
/// app, and the app groups it is entitled to. The stand-in for an iOS bundle's Info.plist
/// and entitlements. Immutable; any thread.
public struct AppIdentity: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        case app
        case appExtension = "extension"
        /// A developer tool (`bgtransfer`): it holds no sessions; it may watch every transfer,
        /// change the simulated device conditions and force-quit apps.
        case tool
    }

    public var bundleIdentifier: BundleIdentifier
    public var kind: Kind
    /// For an extension, the app that contains it; for an app, itself.
    public var containingApp: BundleIdentifier
    /// The name of the containing app's executable, found beside this one (an extension
    /// lives inside its app's bundle on iOS; here the executables share a folder).
    public var containingAppExecutable: String
    public var appGroups: [BundleIdentifier]

    public init(bundleIdentifier: BundleIdentifier, kind: Kind, containingApp: BundleIdentifier, containingAppExecutable: String, appGroups: [BundleIdentifier]) {
        self.bundleIdentifier = bundleIdentifier
        self.kind = kind
        self.containingApp = containingApp
        self.containingAppExecutable = containingAppExecutable
        self.appGroups = appGroups
    }

    /// The app family whose session namespace this process uses: sessions of an app and of
    /// its extensions live side by side, so that the app can adopt an extension's session (S1.6).
    public var family: BundleIdentifier { containingApp }

    /// The session identifier derived from the bundle: unique per bundle and stable.
    public var defaultSessionIdentifier: SessionIdentifier {
        // A bundle identifier is valid, and ".background" keeps it so.
        try! SessionIdentifier(bundleIdentifier.rawValue + ".background")
    }
}
