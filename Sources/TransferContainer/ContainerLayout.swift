import Foundation
import TransferPOSIX

/// Where everything lives inside one shared container root (the stand-in for a device's
/// file system). Every path the project uses is built here, from checked identifiers only,
/// so nothing can be named outside the root. Immutable; any thread.
///
/// The layout is documented in `SharedContainer/README.md`.
public struct ContainerLayout: Sendable, Equatable {
    public let root: URL
    /// The root's path with one trailing slash: what every path inside it begins with. Kept,
    /// as records' paths are resolved against it for every event delivered.
    let rootPrefix: String

    public init(root: URL) {
        // One spelling per folder: `URL(fileURLWithPath:)` adds a trailing slash only when the
        // folder exists, which would make one container look like two.
        let path = PathText.standardized(root.path) ?? root.standardizedFileURL.path
        self.root = URL(fileURLWithPath: path, isDirectory: true)
        self.rootPrefix = path.hasSuffix("/") ? path : path + "/"
    }

    /// The root chosen by `--container PATH`, else `BGTRANSFER_CONTAINER`, else `./SharedContainer`.
    /// Removes `--container PATH` from `arguments`.
    public static func resolve(arguments: inout [String], environment: [String: String] = ProcessInfo.processInfo.environment, defaultPath: String = "SharedContainer") throws(ContainerError) -> ContainerLayout {
        var chosen: String?
        if let index = arguments.firstIndex(of: "--container") {
            guard index + 1 < arguments.count else { throw .missingArgument("--container needs a PATH") }
            chosen = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        } else if let index = arguments.firstIndex(where: { $0.hasPrefix("--container=") }) {
            chosen = String(arguments[index].dropFirst("--container=".count))
            arguments.remove(at: index)
        }
        if chosen == nil, let fromEnvironment = environment["BGTRANSFER_CONTAINER"], !fromEnvironment.isEmpty {
            chosen = fromEnvironment
        }
        let path = chosen ?? defaultPath
        guard !path.isEmpty else { throw .missingArgument("the container path is empty") }
        if path.hasPrefix("/") { return ContainerLayout(root: URL(fileURLWithPath: path)) }
        let here = FileManager.default.currentDirectoryPath
        // The default is found upward, as git finds `.git`: from a folder inside the repository
        // the executables use its `SharedContainer/`, not a new one beside the working directory.
        if chosen == nil, let found = findUpward(path, from: here) { return ContainerLayout(root: URL(fileURLWithPath: found)) }
        return ContainerLayout(root: URL(fileURLWithPath: here).appendingPathComponent(path))
    }

    /// The first folder named `name` in `directory` or one of its parents.
    static func findUpward(_ name: String, from directory: String) -> String? {
        var current = (directory as NSString).standardizingPath
        while true {
            var isDirectory: ObjCBool = false
            let candidate = (current as NSString).appendingPathComponent(name)
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), isDirectory.boolValue { return candidate }
            let parent = PathText.folder(of: current) // NSString's goes through URL, a start's 0.1 ms
            guard parent != current, !parent.isEmpty else { return nil }
            current = parent
        }
    }

    /// The container of apps built on the library (`BackgroundApplication.main`) when neither
    /// `--container` nor `BGTRANSFER_CONTAINER` names one: `$XDG_DATA_HOME/BackgroundTransfer`,
    /// else `$HOME/.local/share/BackgroundTransfer`, the same from every working directory.
    public static func userDefaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return (data as NSString).appendingPathComponent("BackgroundTransfer")
        }
        let home = environment["HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? NSHomeDirectory()
        return (home as NSString).appendingPathComponent(".local/share/BackgroundTransfer")
    }

    // Every component below says whether it is a folder: without that hint Foundation's URL
    // asks the file system, one stat per component, and the daemon builds paths per task.

    // MARK: App groups and private containers

    /// `<root>/AppGroups/<group>/`: what `containerURL(forSecurityApplicationGroupIdentifier:)` returns.
    public func appGroup(_ group: BundleIdentifier) -> URL {
        root.appendingPathComponent("AppGroups", isDirectory: true).appendingPathComponent(group.rawValue, isDirectory: true)
    }

    /// `<root>/Apps/<bundle>/`: the private container of one app or extension.
    public func privateContainer(_ bundle: BundleIdentifier) -> URL {
        root.appendingPathComponent("Apps", isDirectory: true).appendingPathComponent(bundle.rawValue, isDirectory: true)
    }

    // MARK: Sessions

    /// `<root>/Sessions/`: one folder per app family (a containing app and its extensions).
    public var sessionsDirectory: URL { root.appendingPathComponent("Sessions", isDirectory: true) }

    /// `<root>/Sessions/<family>/<identifier>/`: everything the daemon and the holding
    /// process keep about one background session. Identifiers are unique per app family.
    public func sessionDirectory(family: BundleIdentifier, identifier: SessionIdentifier) -> URL {
        sessionsDirectory.appendingPathComponent(family.rawValue, isDirectory: true).appendingPathComponent(identifier.rawValue, isDirectory: true)
    }

    public func sessionLock(family: BundleIdentifier, identifier: SessionIdentifier) -> URL {
        sessionDirectory(family: family, identifier: identifier).appendingPathComponent("session.lock", isDirectory: false)
    }

    /// Where a session's partial and finished downloads live: inside the app group when the
    /// session has a shared container (S3.3), else in the owner's private container.
    public func downloadsDirectory(sharedContainer: BundleIdentifier?, owner: BundleIdentifier, identifier: SessionIdentifier) -> URL {
        let base = sharedContainer.map(appGroup) ?? privateContainer(owner)
        return base.appendingPathComponent("Library/Caches/BackgroundTransfer", isDirectory: true).appendingPathComponent(identifier.rawValue, isDirectory: true)
    }

    // MARK: The daemon

    public var daemonDirectory: URL { root.appendingPathComponent("Daemon", isDirectory: true) }
    public var daemonLock: URL { daemonDirectory.appendingPathComponent("transferd.lock", isDirectory: false) }
    public var daemonSocket: URL { daemonDirectory.appendingPathComponent("transferd.sock", isDirectory: false) }
    public var appRegistry: URL { daemonDirectory.appendingPathComponent("apps.json", isDirectory: false) }
    /// The simulated device conditions (`bgtransfer conditions`).
    public var deviceConditions: URL { daemonDirectory.appendingPathComponent("conditions.json", isDirectory: false) }
    /// Root certificates installed on the simulated device (PEM), trusted for every app's
    /// HTTPS besides the system store, as a CA installed by a profile is on iOS.
    public var deviceTrustedRoots: URL { daemonDirectory.appendingPathComponent("trusted-roots.pem", isDirectory: false) }

    // MARK: Logs

    public var logsDirectory: URL { root.appendingPathComponent("Logs", isDirectory: true) }
    public var logFile: URL { logsDirectory.appendingPathComponent("transfer.log", isDirectory: false) }

    /// Creates the top-level folders (0700).
    public func prepare() throws(Errno) {
        for directory in [root, root.appendingPathComponent("AppGroups", isDirectory: true), root.appendingPathComponent("Apps", isDirectory: true), sessionsDirectory, daemonDirectory, logsDirectory] {
            try DurableFile.makeDirectory(directory.path)
        }
    }
}

/// A container that cannot be used as asked.
public enum ContainerError: Error, CustomStringConvertible, Sendable {
    case missingArgument(String)
    case notEntitled(bundle: String, appGroup: String)

    public var description: String {
        switch self {
        case .missingArgument(let text): text
        case .notEntitled(let bundle, let group): "\(bundle) is not entitled to app group \(group)"
        }
    }
}
