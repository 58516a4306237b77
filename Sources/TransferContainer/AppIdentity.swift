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

    /// The identity of a plain program that declares no entitlements (the "just a program"
    /// case): the app `program.<executable name>` (characters other than ASCII letters,
    /// digits, '-' and '_' become '_'), its own containing app, no app groups. The daemon
    /// grants exactly this identity to a process whose executable declares nothing, so a
    /// program gets a private container and sessions of its own, and is relaunched as itself.
    public static func program(executablePath: String) -> AppIdentity {
        let name = (executablePath as NSString).lastPathComponent
        var cleaned = String(name.unicodeScalars.map { scalar -> Character in
            let value = scalar.value
            let plain = (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value) || value == 0x2D || value == 0x5F
            return plain ? Character(scalar) : "_"
        })
        while cleaned.utf8.count > 150 { cleaned.removeLast() }
        if cleaned.isEmpty { cleaned = "unnamed" }
        let bundle = (try? BundleIdentifier("program." + cleaned)) ?? BundleIdentifier(constructed: "program.unnamed")
        return AppIdentity(bundleIdentifier: bundle, kind: .app, containingApp: bundle, containingAppExecutable: name, appGroups: [])
    }

    /// The app family whose session namespace this process uses: sessions of an app and of
    /// its extensions live side by side, so that the app can adopt an extension's session (S1.6).
    public var family: BundleIdentifier { containingApp }

    /// The session identifier derived from the bundle: unique per bundle and stable.
    /// `<bundle>.background`; a bundle identifier too long for that (over 189 bytes) keeps
    /// its first 170 bytes and a digest of the whole: `<prefix>.<16 hex digits>.background`.
    public var defaultSessionIdentifier: SessionIdentifier {
        let suffix = ".background"
        let whole = bundleIdentifier.rawValue
        if let plain = try? SessionIdentifier(whole + suffix) { return plain }
        // FNV-1a, 64 bits: stable across runs and builds (Hasher is seeded per process).
        var digest: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in whole.utf8 {
            digest ^= UInt64(byte)
            digest = digest &* 0x0000_0100_0000_01b3
        }
        var prefix = String(whole.utf8.prefix(170).map { Character(Unicode.Scalar($0)) })
        while prefix.hasSuffix(".") || prefix.hasSuffix("-") { prefix.removeLast() }
        let hex = String(digest, radix: 16)
        let shortened = (prefix.isEmpty ? "bundle" : prefix) + "." + String(repeating: "0", count: 16 - hex.count) + hex + suffix
        // A bundle identifier holds only ASCII letters, digits, '.', '-' and '_', so the
        // shortened form is valid; should it not be, the digest alone is.
        return (try? SessionIdentifier(shortened)) ?? SessionIdentifier(digestOnly: hex + suffix)
    }
}
