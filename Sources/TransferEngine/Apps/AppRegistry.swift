import Foundation
import TransferContainer

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
    }

    private let path: String
    private let log: TransferLog
    private(set) var apps: [BundleIdentifier: App] = [:]

    init(layout: ContainerLayout, log: TransferLog) {
        self.path = layout.appRegistry.path
        self.log = log
        if FileManager.default.fileExists(atPath: path) {
            do {
                let file = try RecordCoding.read(File.self, from: path)
                for (key, app) in file.apps {
                    if let bundle = try? BundleIdentifier(key) { apps[bundle] = app }
                }
            } catch {
                log.error("registry", "app registry unusable, starting empty: \(error)")
                rename(path, path + ".corrupt")
            }
        }
    }

    /// Records a bundle from its hello (first connect or a moved executable).
    func register(_ hello: ClientHello) {
        let directory = (hello.executablePath as NSString).deletingLastPathComponent
        let containingExecutable = hello.identity.kind == .app
            ? hello.executablePath
            : (directory as NSString).appendingPathComponent(hello.identity.containingAppExecutable)
        let app = App(identity: hello.identity, executablePath: hello.executablePath, lastSeen: Date(), containingAppExecutablePath: containingExecutable)
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

    /// The executable to launch for sessions of the app family `family`.
    func launchExecutable(family: BundleIdentifier) -> String? {
        if let app = apps[family] { return app.executablePath }
        return apps.values.first { $0.identity.containingApp == family }?.containingAppExecutablePath
    }

    private func save() {
        var file = File(apps: [:])
        for (bundle, app) in apps { file.apps[bundle.rawValue] = app }
        do { try RecordCoding.write(file, to: path) } catch { log.error("registry", "cannot save app registry: \(error)") }
    }
}
