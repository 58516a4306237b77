import BackgroundTransfer
import TransferContainer

/// The bundles the stand-in executables play: a containing app and two extensions sharing
/// one app group (their Info.plist and entitlements, in effect).
public enum StandInIdentities {
    public static let appGroup = try! BundleIdentifier("group.com.example.transfers")
    public static let hostBundle = try! BundleIdentifier("com.example.host")

    public static let host = AppIdentity(bundleIdentifier: hostBundle, kind: .app, containingApp: hostBundle, containingAppExecutable: "host-app", appGroups: [appGroup])
    public static let shareExtension = AppIdentity(bundleIdentifier: try! BundleIdentifier("com.example.host.share"), kind: .appExtension, containingApp: hostBundle, containingAppExecutable: "host-app", appGroups: [appGroup])
    public static let fetchExtension = AppIdentity(bundleIdentifier: try! BundleIdentifier("com.example.host.fetch"), kind: .appExtension, containingApp: hostBundle, containingAppExecutable: "host-app", appGroups: [appGroup])

    public static let all = [host, shareExtension, fetchExtension]
}
