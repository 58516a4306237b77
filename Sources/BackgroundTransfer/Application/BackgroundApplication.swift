import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

/// The identifiers this process was launched to handle events for, and what happens when
/// the app calls the completion handler it was given. Thread-safe.
enum BackgroundLaunch {
    private static let launched = Locked<Set<SessionIdentifier>>([])

    static func markLaunched(for identifier: SessionIdentifier) {
        _ = launched.withLock { $0.insert(identifier) }
    }

    static func isLaunched(for identifier: SessionIdentifier) -> Bool {
        launched.withLock { $0.contains(identifier) }
    }
}

/// What the app implements (the analogue of `UIApplicationDelegate`): its launch, and its
/// relaunch for a background session's events. Every method has a default. Called on the
/// main queue.
public protocol BackgroundApplicationDelegate: AnyObject {
    /// The app has launched, by the user or for background events (then
    /// `application(_:handleEventsForBackgroundURLSession:completionHandler:)` follows).
    /// Default: true.
    func application(_ application: BackgroundApplication, didFinishLaunchingWithOptions launchOptions: [BackgroundApplication.LaunchOptionsKey: Any]?) -> Bool

    /// The system launched the app because the session `identifier` has events. Store the
    /// completion handler, open the session with that identifier (and the same shared
    /// container), and call the handler after `urlSessionDidFinishEvents` (S3.2). A process
    /// that keeps running after it called the handler is woken again for events that come
    /// later: called again, with a new handler, before them (asking for the session again
    /// gives the one already open). Default: calls the handler at once (the events wait for
    /// the next launch).
    func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping @Sendable () -> Void)
}

extension BackgroundApplicationDelegate {
    public func application(_ application: BackgroundApplication, didFinishLaunchingWithOptions launchOptions: [BackgroundApplication.LaunchOptionsKey: Any]?) -> Bool { true }

    public func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping @Sendable () -> Void) {
        completionHandler()
    }
}

/// The app object (the stand-in for `UIApplication`): knows whether the app was launched by
/// the user or by the system for a background session's events, and hands those launches
/// to its delegate. One per process: `BackgroundApplication.shared`.
///
/// An app's whole `main.swift`:
///
///     import BackgroundTransfer
///     BackgroundApplication.main(entitlements: entitlements, delegate: AppDelegate())
///
/// A plain program with no entitlements literal: `BackgroundApplication.main(delegate: …)`.
public final class BackgroundApplication: @unchecked Sendable {
    /// Keys of `didFinishLaunchingWithOptions` (Apple's name). A relaunch for events has none
    /// here: the identifier comes to `handleEventsForBackgroundURLSession`.
    public struct LaunchOptionsKey: Hashable, RawRepresentable, Sendable {
        /// The key's name.
        public let rawValue: String
        /// A key with this name.
        public init(rawValue: String) { self.rawValue = rawValue }
    }

    /// Whether the app is in front of the user (Apple's `UIApplication.State`).
    public enum State: Int, Sendable {
        /// Launched by the user: in the foreground.
        case active = 0
        /// Between the two (not used here).
        case inactive = 1
        /// Launched for background events, or an extension: in the background.
        case background = 2
    }

    /// A request for background time (Apple's `UIBackgroundTaskIdentifier`).
    public struct BackgroundTaskIdentifier: Hashable, RawRepresentable, Sendable {
        /// The request's number.
        public let rawValue: Int
        /// The request with this number.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// No request (what `beginBackgroundTask` returns when it cannot grant one).
        public static let invalid = BackgroundTaskIdentifier(rawValue: 0)
    }

    /// The identifier the app was launched for (`--handle-events-for-background-session ID`), if any.
    public let backgroundSessionIdentifier: String?
    /// Arguments left after the launch options and `--container` were taken out.
    public let arguments: [String]
    /// Who this process is (its bundle, kind, containing app, app groups).
    public let identity: AppIdentity
    /// The app's delegate. `main(entitlements:delegate:)` sets it; kept strongly.
    public var delegate: BackgroundApplicationDelegate? {
        get { delegateBox.withLock { $0 } }
        set { delegateBox.withLock { $0 = newValue } }
    }
    private let delegateBox = Locked<BackgroundApplicationDelegate?>(nil)
    private let completed = DispatchSemaphore(value: 0)
    /// The delegate the background launch was handed to: woken again for later events (S3.2).
    private let launchDelegate = Locked<BackgroundApplicationDelegate?>(nil)
    /// Set by `main`: the process exits once the background launch's completion handler has
    /// been called (iOS suspends the app then).
    private let exitsWhenEventsHandled = Locked(false)

    private static let current = Locked<BackgroundApplication?>(nil)

    /// The app object. Made by `main(entitlements:delegate:)` or the initialisers; asked
    /// before either, it is made for the plain program this executable is (see
    /// `AppIdentity.program(executablePath:)`), in the user's default container.
    public static var shared: BackgroundApplication {
        if let existing = current.withLock({ $0 }) { return existing }
        let made = BackgroundApplication(fallbackFor: AppIdentity.program(executablePath: ProcessSpawner.currentExecutable))
        return current.withLock { value in
            if let value { return value }
            value = made
            return made
        }
    }

    /// Reads the launch options, sets up `AppEnvironment` for the one bundle the executable's
    /// entitlements declare (`entitlements` is the declaration literal compiled into it; the
    /// daemon reads the same bytes from the executable file, see `Entitlements`).
    /// - Parameters:
    ///   - entitlements: the executable's declaration literal.
    ///   - arguments: the launch options; the process's own arguments unless given.
    ///   - defaultContainer: the container when neither `--container` nor
    ///     `BGTRANSFER_CONTAINER` names one (relative paths are taken from the working directory).
    /// - Throws: `EntitlementsError`, or `ContainerError` / `IdentifierError` for bad launch options.
    public convenience init(entitlements: String, arguments: [String] = Array(CommandLine.arguments.dropFirst()), defaultContainer: String = "SharedContainer") throws {
        let identities = try Entitlements.identities(inDeclaration: entitlements)
        guard identities.count == 1 else { throw EntitlementsError.notOneIdentity(count: identities.count) }
        try self.init(identity: identities[0], arguments: arguments, defaultContainer: defaultContainer)
    }

    /// Reads the launch options, sets up `AppEnvironment` for `identity`, and makes sure a
    /// transfer daemon serves the container when it holds unfinished work (a task to carry
    /// on, an event waiting for an app), as nsurlsessiond is always there on iOS: a daemon
    /// that crashed is started again by any launch, one that opens no session too. With no
    /// such work it only looks at the container (no daemon is started).
    /// - Throws: `ContainerError` or `IdentifierError` for bad launch options.
    public init(identity: AppIdentity, arguments: [String] = Array(CommandLine.arguments.dropFirst()), defaultContainer: String = "SharedContainer") throws {
        var arguments = arguments
        let layout = try ContainerLayout.resolve(arguments: &arguments, defaultPath: defaultContainer)
        var identifier: String?
        if let index = arguments.firstIndex(of: "--handle-events-for-background-session") {
            guard index + 1 < arguments.count else { throw ContainerError.missingArgument("--handle-events-for-background-session needs an identifier") }
            identifier = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        if let identifier {
            _ = try SessionIdentifier(identifier)
        }
        self.backgroundSessionIdentifier = identifier
        self.arguments = arguments
        self.identity = identity
        // Extensions always run in the background; an app launched for events does too.
        AppEnvironment.bootstrap(identity: identity, layout: layout, isForeground: identity.kind == .app && identifier == nil)
        Self.current.withLock { $0 = self }
        // As nsurlsessiond is always there on iOS: work left by a crashed daemon is taken up
        // on any launch, also one that opens no session. Cheap when there is none.
        DaemonConnection.serveUnfinishedWork()
    }

    /// `shared` asked for before anything set the app up: the program, in the user's container.
    /// A process that set `AppEnvironment` up itself keeps it.
    private init(fallbackFor identity: AppIdentity) {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let layout = (try? ContainerLayout.resolve(arguments: &arguments, defaultPath: ContainerLayout.userDefaultPath()))
            ?? ContainerLayout(root: URL(fileURLWithPath: ContainerLayout.userDefaultPath()))
        self.backgroundSessionIdentifier = nil
        self.arguments = arguments
        if AppEnvironment.isBootstrapped {
            self.identity = AppEnvironment.identity
        } else {
            self.identity = identity
            AppEnvironment.bootstrap(identity: identity, layout: layout, isForeground: true)
        }
    }

    // MARK: Running an app

    /// Runs the app and never returns (the analogue of `UIApplicationMain`): reads the launch
    /// options (`--container PATH`, else `BGTRANSFER_CONTAINER`, else
    /// `ContainerLayout.userDefaultPath()`; `--handle-events-for-background-session ID` when
    /// `transferd` relaunches the app), makes `shared` with `delegate`, then on the main queue
    /// calls `didFinishLaunchingWithOptions` and, for a relaunch,
    /// `handleEventsForBackgroundURLSession`. A relaunched app exits once it has called the
    /// completion handler (and the daemon has the acknowledgement), or with status 1 when
    /// `backgroundTimeLimit` runs out first; events that came after its
    /// `urlSessionDidFinishEvents` wait for its next launch. On a user launch the app runs on
    /// the main queue until it exits by itself. Either way, as it starts, a transfer daemon is made sure of
    /// when the container holds unfinished work (see `init(identity:arguments:defaultContainer:)`).
    /// - Parameters:
    ///   - entitlements: the executable's declaration literal; nil for a plain program, whose
    ///     identity is derived from its executable (`AppIdentity.program(executablePath:)`).
    ///   - delegate: the app delegate.
    ///   - arguments: the launch options; the process's own arguments unless given.
    ///   - backgroundTimeLimit: seconds a relaunched app has to call the completion handler.
    /// Bad launch options or entitlements end the process with status 64 and a message on stderr.
    public static func main(entitlements: String? = nil, delegate: BackgroundApplicationDelegate, arguments: [String] = Array(CommandLine.arguments.dropFirst()), backgroundTimeLimit: TimeInterval = 30) -> Never {
        let application: BackgroundApplication
        do {
            if let entitlements {
                application = try BackgroundApplication(entitlements: entitlements, arguments: arguments, defaultContainer: ContainerLayout.userDefaultPath())
            } else {
                application = try BackgroundApplication(identity: .program(executablePath: ProcessSpawner.currentExecutable), arguments: arguments, defaultContainer: ContainerLayout.userDefaultPath())
            }
        } catch {
            let name = (ProcessSpawner.currentExecutable as NSString).lastPathComponent
            FileHandle.standardError.write(Data("\(name): \(error)\n".utf8))
            exit(64)
        }
        application.delegate = delegate
        application.exitsWhenEventsHandled.withLock { $0 = true }
        if application.isLaunchedForBackgroundEvents {
            application.backgroundDeadline.withLock { $0 = Date().addingTimeInterval(backgroundTimeLimit) }
        }
        DispatchQueue.main.async {
            guard let delegate = application.delegate else { return }
            _ = delegate.application(application, didFinishLaunchingWithOptions: nil)
            guard application.isLaunchedForBackgroundEvents else { return }
            application.deliverBackgroundLaunch(to: delegate)
            DispatchQueue.main.asyncAfter(deadline: .now() + backgroundTimeLimit) {
                AppEnvironment.log.error("application", "events were not finished within the background time of \(Int(backgroundTimeLimit)) s; exiting")
                exit(1)
            }
        }
        dispatchMain()
    }

    /// When a relaunched app run by `main` is ended for taking too long.
    private let backgroundDeadline = Locked<Date?>(nil)

    /// Seconds left before the background time of a relaunch runs out (Apple's name);
    /// `.greatestFiniteMagnitude` in the foreground, as on iOS.
    public var backgroundTimeRemaining: TimeInterval {
        backgroundDeadline.withLock { $0 }.map { max($0.timeIntervalSinceNow, 0) } ?? .greatestFiniteMagnitude
    }

    /// `.background` for an app launched for events and for an extension, else `.active`.
    public var applicationState: State {
        isLaunchedForBackgroundEvents || identity.kind == .appExtension ? .background : .active
    }

    // MARK: Where the app keeps its files

    /// The app's private container, `<container>/Apps/<bundle>/` (what `NSHomeDirectory()`
    /// is in an iOS app): `Documents/`, `Library/` and `tmp/` lie in it.
    public var homeDirectory: URL { directory(nil) }
    /// `<home>/Documents/` (made on first use).
    public var documentsDirectory: URL { directory("Documents") }
    /// `<home>/Library/` (made on first use).
    public var libraryDirectory: URL { directory("Library") }
    /// `<home>/tmp/` (made on first use): the app's temporary directory, inside its
    /// container, so that uploads from it are allowed as on iOS.
    public var temporaryDirectory: URL { directory("tmp") }

    private func directory(_ name: String?) -> URL {
        let home = AppEnvironment.layout.privateContainer(AppEnvironment.identity.bundleIdentifier)
        let url = name.map { home.appendingPathComponent($0, isDirectory: true) } ?? home
        try? DurableFile.makeDirectory(home.path)
        if name != nil { try? DurableFile.makeDirectory(url.path) }
        return url
    }

    /// True when the daemon launched this process to deliver a session's events.
    public var isLaunchedForBackgroundEvents: Bool { backgroundSessionIdentifier != nil }

    /// Hands a background launch to the delegate, as UIKit does before anything else.
    public func deliverBackgroundLaunch(to delegate: BackgroundApplicationDelegate) {
        guard let name = backgroundSessionIdentifier, let identifier = try? SessionIdentifier(name) else { return }
        BackgroundLaunch.markLaunched(for: identifier)
        launchDelegate.withLock { $0 = delegate }
        AppEnvironment.log.notice("application", "launched to handle events for background session \(name)", session: name, event: LogEvent(.launchedForEvents))
        handEvents(of: identifier, generation: 0, to: delegate)
    }

    /// Calls the delegate's `handleEventsForBackgroundURLSession` for launch or wake
    /// `generation`, with a completion handler of its own that acknowledges that batch.
    private func handEvents(of identifier: SessionIdentifier, generation: Int,
                            to delegate: BackgroundApplicationDelegate) {
        let name = identifier.rawValue
        let called = Locked(false)
        delegate.application(self, handleEventsForBackgroundURLSession: name) { [self] in
            guard !called.withLock({ let was = $0; $0 = true; return was }) else { return }
            let exits = exitsWhenEventsHandled.withLock { $0 }
            let core = SessionCoordinator.shared.cachedSession(
                layout: AppEnvironment.layout, family: AppEnvironment.identity.family, identifier: identifier
            ) as SessionCore?
            let acknowledge: @Sendable () -> Void = { [self] in
                core?.completionHandlerCalled(generation: generation, staying: !exits)
                AppEnvironment.log.notice("application", "completion handler called; events acknowledged",
                                          session: name)
                completed.signal()
                guard exits else { return }
                // As iOS suspends the app: once the daemon has the acknowledgement.
                _ = core?.waitForAnswers(timeout: DaemonConnection.requestTimeout)
                DispatchQueue.main.async { exit(0) }
            }
            // Called inside urlSessionDidFinishEvents, which the session's delivery waits on, it
            // is taken once that call returns; called elsewhere, before the handler returns (an
            // app may exit right after it).
            if SessionCore.isInDelegateCall {
                DispatchQueue.global().async(execute: acknowledge)
            } else {
                acknowledge()
            }
        }
    }

    /// Wakes the app again in this process (one that stayed after it called its completion
    /// handler) for session `identifier`'s events that came later, as iOS wakes a suspended app
    /// (S3.2): on the main queue, the launch's delegate gets `handleEventsForBackgroundURLSession`
    /// with a new completion handler; `deliver` then hands the session the events.
    static func wake(for identifier: SessionIdentifier, generation: Int,
                     then deliver: @escaping @Sendable () -> Void) {
        guard let application = current.withLock({ $0 }) else { return }
        DispatchQueue.main.async {
            guard let delegate = application.launchDelegate.withLock({ $0 }) else { return }
            AppEnvironment.log.notice("application", "woken again to handle events for background session "
                                      + identifier.rawValue, session: identifier.rawValue,
                                      event: LogEvent(.wokenForEvents))
            application.handEvents(of: identifier, generation: generation, to: delegate)
            deliver()
        }
    }

    // MARK: Background time (beginBackgroundTask)

    private let backgroundTasks = Locked<[Int: DispatchWorkItem]>([:])
    private let nextBackgroundTask = Locked(1)

    /// Asks for time to finish work in the foreground (the analogue of
    /// `UIApplication.beginBackgroundTask(withName:expirationHandler:)`): when `timeLimit`
    /// runs out before `endBackgroundTask` is called, `expirationHandler` runs on the main
    /// queue — the moment to cancel foreground downloads with resume data and hand them to a
    /// background session.
    @discardableResult
    public func beginBackgroundTask(withName name: String? = nil, timeLimit: TimeInterval = 30, expirationHandler: (@Sendable () -> Void)? = nil) -> BackgroundTaskIdentifier {
        let identifier = nextBackgroundTask.withLock { value -> Int in
            defer { value += 1 }
            return value
        }
        let item = DispatchWorkItem { [self] in
            guard backgroundTasks.withLock({ $0.removeValue(forKey: identifier) }) != nil else { return }
            AppEnvironment.log.notice("application", "background time of \(name ?? "task \(identifier)") expired after \(timeLimit) s")
            expirationHandler?()
        }
        backgroundTasks.withLock { $0[identifier] = item }
        DispatchQueue.main.asyncAfter(deadline: .now() + timeLimit, execute: item)
        return BackgroundTaskIdentifier(rawValue: identifier)
    }

    /// Apple's other spelling.
    @discardableResult
    public func beginBackgroundTask(expirationHandler: (@Sendable () -> Void)? = nil) -> BackgroundTaskIdentifier {
        beginBackgroundTask(withName: nil, expirationHandler: expirationHandler)
    }

    /// The work finished in time.
    public func endBackgroundTask(_ identifier: BackgroundTaskIdentifier) {
        backgroundTasks.withLock { $0.removeValue(forKey: identifier.rawValue) }?.cancel()
    }

    /// Waits until the app calls the background launch's completion handler.
    public func waitForCompletionHandler(timeout: TimeInterval) -> Bool {
        completed.wait(timeout: .now() + timeout) == .success
    }
}
