import Foundation
import TransferPOSIX
import TransferContainer
import TransferCoding
import TransferLogging

/// `Daemon/apps.json`: every bundle that has connected — its executable, containing app and
/// app groups — so that the daemon can launch a containing app that never ran (its
/// extension told us where it lives). Owned by the event loop.
final class AppRegistry {
    struct App: Codable, Equatable {
        var identity: AppIdentity
        var executablePath: String
        var lastSeen: Date
        /// The executable to launch for this bundle's sessions: the containing app's.
        var containingAppExecutablePath: String
    }

    private struct File: Codable {
        var version = 1
        var apps: [String: App]
        /// App families the user force-quit and has not launched since (S4.2).
        var forceQuit: [String]?
        /// The resume rate limiter of each app family now (S6.5), for inspection: a
        /// restarted daemon starts every app over.
        var relaunchLimits: [String: RelaunchLimiter]?
        /// Failed relaunches in a row of each app family, and whether the daemon gave up.
        var relaunchFailures: [String: RelaunchGiveUp]?
    }

    private let path: String
    /// The container's root: the file is read and replaced through it, never through a symlink.
    private let root: RootDirectory
    private let log: TransferLog
    private(set) var apps: [BundleIdentifier: App] = [:]
    private(set) var forceQuit: Set<BundleIdentifier> = []
    /// The resume rate limiter of each app family that was relaunched (S6.5).
    var relaunchLimits: [BundleIdentifier: RelaunchLimiter] = [:] {
        didSet { if relaunchLimits != oldValue { save() } }
    }
    /// Failed relaunches of each app family since its last successful one or user launch:
    /// durable, so that a restarted daemon does not start trying again.
    var relaunchFailures: [BundleIdentifier: RelaunchGiveUp] = [:] {
        didSet { if relaunchFailures != oldValue { save() } }
    }

    init(layout: ContainerLayout, root: RootDirectory, log: TransferLog) {
        self.path = layout.appRegistry.path
        self.root = root
        self.log = log
        if (try? root.status(path)) != nil {
            do {
                let file = try RecordCoding.decode(File.self, from: root.read(path, limit: StateFileLimits.appRegistry))
                for (key, app) in file.apps {
                    if let bundle = try? BundleIdentifier(key) { apps[bundle] = app }
                }
                forceQuit = Set((file.forceQuit ?? []).compactMap { try? BundleIdentifier($0) })
                for (key, failures) in file.relaunchFailures ?? [:] {
                    if let family = try? BundleIdentifier(key) { relaunchFailures[family] = failures }
                }
            } catch {
                log.error("registry", "app registry unusable, starting empty: \(error)")
                try? root.rename(path, to: path + ".corrupt")
            }
        }
    }

    /// Records a bundle from its hello (first connect or a moved executable).
    func register(_ hello: ClientHello, at now: Date) {
        let directory = (hello.executablePath as NSString).deletingLastPathComponent
        let containingExecutable = hello.identity.kind == .app
            ? hello.executablePath
            : (directory as NSString).appendingPathComponent(hello.identity.containingAppExecutable)
        let app = App(identity: hello.identity, executablePath: hello.executablePath, lastSeen: now, containingAppExecutablePath: containingExecutable)
        let previous = apps[hello.identity.bundleIdentifier]
        apps[hello.identity.bundleIdentifier] = app
        // The containing app may never have connected: what its extension says is what we know.
        if hello.identity.kind == .appExtension, apps[hello.identity.containingApp] == nil {
            log.info("registry", "learned of containing app \(hello.identity.containingApp) at \(containingExecutable) from \(hello.identity.bundleIdentifier)")
        }
        if previous?.identity != app.identity || previous?.executablePath != app.executablePath {
            save()
        }
    }

    /// The containing app of a bundle we know (itself for an app).
    func family(of bundle: BundleIdentifier) -> BundleIdentifier {
        apps[bundle]?.identity.containingApp ?? bundle
    }

    /// Records a force quit, or the user launch that ends it; durable.
    func setForceQuit(_ family: BundleIdentifier, _ on: Bool) {
        guard forceQuit.contains(family) != on else { return }
        if on { forceQuit.insert(family) } else { forceQuit.remove(family) }
        save()
    }

    /// The executable to launch for sessions of the app family `family`.
    func launchExecutable(family: BundleIdentifier) -> String? {
        if let app = apps[family] { return app.executablePath }
        return apps.values.first { $0.identity.containingApp == family }?.containingAppExecutablePath
    }

    private func save() {
        var file = File(apps: [:], forceQuit: forceQuit.map(\.rawValue).sorted(),
                        relaunchLimits: Dictionary(uniqueKeysWithValues: relaunchLimits.map { ($0.key.rawValue, $0.value) }),
                        relaunchFailures: Dictionary(uniqueKeysWithValues: relaunchFailures.map { ($0.key.rawValue, $0.value) }))
        for (bundle, app) in apps { file.apps[bundle.rawValue] = app }
        do { try root.write(RecordCoding.encoder().encode(file), to: path) } catch { log.error("registry", "cannot save app registry: \(error)") }
    }
}
