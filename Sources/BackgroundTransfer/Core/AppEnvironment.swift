@_exported import Foundation
@_exported import FoundationNetworking
import TransferContainer
import TransferLogging
import TransferPOSIX

/// Who this process is and which container it lives in: the stand-in for `Bundle.main`, its
/// entitlements and the device's file system. Set once at start-up by the executable
/// (`AppEnvironment.bootstrap`); read by every session. Thread-safe.
public enum AppEnvironment {
    struct State: Sendable {
        var identity: AppIdentity
        var layout: ContainerLayout
        var isForeground: Bool
        var log: TransferLog
        /// The variables the library reads (`BGTRANSFER_TRANSFERD`), taken once at bootstrap:
        /// reading `environ` while another thread calls `setenv` is undefined behaviour.
        var environment: [String: String]
    }

    private static let state = Locked<State?>(nil)

    /// Declares the process's identity and container. Call before opening any session.
    /// - Parameter identity: who this process is (bundle identifier, kind, app groups).
    /// - Parameter layout: the container it works in.
    /// - Parameter isForeground: whether the user launched the process (false for an app
    ///   launched for background events, and for extensions, which run in the background).
    /// - Parameter environment: where the library's settings come from; the process's own
    ///   environment unless given.
    public static func bootstrap(identity: AppIdentity, layout: ContainerLayout, isForeground: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let process = (ProcessSpawner.currentExecutable as NSString).lastPathComponent
        try? layout.prepare()
        let log = TransferLog(layout: layout, process: process, subsystem: "com.example.BackgroundTransfer")
        state.withLock { $0 = State(identity: identity, layout: layout, isForeground: isForeground, log: log, environment: environment) }
    }

    /// The environment; a process that set none up is the plain program its executable is
    /// (`BackgroundApplication.shared` sets that up: `AppIdentity.program(executablePath:)`,
    /// the user's default container).
    static var current: State {
        if let value = state.withLock({ $0 }) { return value }
        let application = BackgroundApplication.shared // bootstraps, unless it was made before
        if let value = state.withLock({ $0 }) { return value }
        let layout = ContainerLayout(root: URL(fileURLWithPath: ContainerLayout.userDefaultPath()))
        bootstrap(identity: application.identity, layout: layout, isForeground: true)
        return state.withLock { $0 } ?? State(identity: application.identity, layout: layout, isForeground: true, log: TransferLog(layout: layout, process: "program", subsystem: "com.example.BackgroundTransfer"),
                                              environment: ProcessInfo.processInfo.environment)
    }

    static var isBootstrapped: Bool { state.withLock { $0 != nil } }

    /// Who this process is: its bundle identifier, kind (app, extension, program) and app groups.
    public static var identity: AppIdentity { current.identity }
    /// The container this process works in (the stand-in for the device's file system).
    public static var layout: ContainerLayout { current.layout }
    /// The container's shared log, as this process writes to it.
    public static var log: TransferLog { current.log }

    /// The app group's container, as `FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`
    /// returns it on iOS: `<root>/AppGroups/<group>/`, or nil when this bundle is not entitled to the group.
    public static func containerURL(forSecurityApplicationGroupIdentifier group: String) -> URL? {
        guard let bundle = try? BundleIdentifier(group), current.identity.appGroups.contains(bundle) else { return nil }
        let url = current.layout.appGroup(bundle)
        try? DurableFile.makeDirectory(url.path)
        return url
    }
}

extension FileManager {
    /// The shared container of an app group this process is entitled to (Apple's name).
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? {
        AppEnvironment.containerURL(forSecurityApplicationGroupIdentifier: groupIdentifier)
    }
}

extension OperationQueue {
    /// The delegate queue a session makes when given none: serial, so events arrive in order (S3.5).
    static func serialDelegateQueue(name: String) -> OperationQueue {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = name
        return queue
    }
}
