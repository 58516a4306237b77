import Foundation
import TransferContainer

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

/// What the app implements to be relaunched for background events: the analogue of
/// `UIApplicationDelegate.application(_:handleEventsForBackgroundURLSession:completionHandler:)`.
public protocol BackgroundApplicationDelegate: AnyObject {
    /// The system launched the app because the session `identifier` has events. Store the
    /// completion handler, open the session with that identifier (and the same shared
    /// container), and call the handler after `urlSessionDidFinishEvents` (S3.2).
    func application(_ application: BackgroundApplication, handleEventsForBackgroundURLSession identifier: String, completionHandler: @escaping @Sendable () -> Void)
}

/// The app object (the stand-in for `UIApplication`): knows whether the app was launched by
/// the user or by the system for a background session's events, and hands those launches
/// to its delegate. One per process.
public final class BackgroundApplication: @unchecked Sendable {
    /// The identifier the app was launched for (`--handle-events-for-background-session ID`), if any.
    public let backgroundSessionIdentifier: String?
    /// Arguments left after the launch options and `--container` were taken out.
    public let arguments: [String]
    private let completed = DispatchSemaphore(value: 0)
    private let handlerCalled = Locked(false)

    /// Reads the launch options, sets up `AppEnvironment` for the one bundle the executable's
    /// entitlements declare (`entitlements` is the declaration literal compiled into it; the
    /// daemon reads the same bytes from the executable file, see `Entitlements`).
    /// - Throws: `EntitlementsError`, or `ContainerError` / `IdentifierError` for bad launch options.
    public convenience init(entitlements: String, arguments: [String] = Array(CommandLine.arguments.dropFirst())) throws {
        let identities = try Entitlements.identities(inDeclaration: entitlements)
        guard identities.count == 1 else { throw EntitlementsError.notOneIdentity(count: identities.count) }
        try self.init(identity: identities[0], arguments: arguments)
    }

    /// Reads the launch options, sets up `AppEnvironment` for `identity`.
    /// - Throws: `ContainerError` or `IdentifierError` for bad launch options.
    public init(identity: AppIdentity, arguments: [String] = Array(CommandLine.arguments.dropFirst())) throws {
        var arguments = arguments
        let layout = try ContainerLayout.resolve(arguments: &arguments)
        var identifier: String?
        if let index = arguments.firstIndex(of: "--handle-events-for-background-session") {
            guard index + 1 < arguments.count else { throw ContainerError.missingArgument("--handle-events-for-background-session needs an identifier") }
            identifier = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        self.backgroundSessionIdentifier = identifier
        self.arguments = arguments
        // Extensions always run in the background; an app launched for events does too.
        AppEnvironment.bootstrap(identity: identity, layout: layout, isForeground: identity.kind == .app && identifier == nil)
        if let identifier {
            _ = try SessionIdentifier(identifier)
        }
    }

    public var isLaunchedForBackgroundEvents: Bool { backgroundSessionIdentifier != nil }

    /// Hands a background launch to the delegate, as UIKit does before anything else.
    public func deliverBackgroundLaunch(to delegate: BackgroundApplicationDelegate) {
        guard let name = backgroundSessionIdentifier, let identifier = try? SessionIdentifier(name) else { return }
        BackgroundLaunch.markLaunched(for: identifier)
        AppEnvironment.log.notice("application", "launched to handle events for background session \(name)", session: name)
        delegate.application(self, handleEventsForBackgroundURLSession: name) { [self] in
            guard !handlerCalled.withLock({ let was = $0; $0 = true; return was }) else { return }
            let core = SessionCoordinator.shared.cachedSession(layout: AppEnvironment.layout, family: AppEnvironment.identity.family, identifier: identifier) as SessionCore?
            core?.completionHandlerCalled()
            AppEnvironment.log.notice("application", "completion handler called; events acknowledged", session: name)
            completed.signal()
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
    public func beginBackgroundTask(withName name: String? = nil, timeLimit: TimeInterval = 30, expirationHandler: @escaping @Sendable () -> Void) -> Int {
        let identifier = nextBackgroundTask.withLock { value -> Int in
            defer { value += 1 }
            return value
        }
        let item = DispatchWorkItem { [self] in
            guard backgroundTasks.withLock({ $0.removeValue(forKey: identifier) }) != nil else { return }
            AppEnvironment.log.notice("application", "background time of \(name ?? "task \(identifier)") expired after \(timeLimit) s")
            expirationHandler()
        }
        backgroundTasks.withLock { $0[identifier] = item }
        DispatchQueue.main.asyncAfter(deadline: .now() + timeLimit, execute: item)
        return identifier
    }

    /// The work finished in time.
    public func endBackgroundTask(_ identifier: Int) {
        backgroundTasks.withLock { $0.removeValue(forKey: identifier) }?.cancel()
    }

    /// Waits until the app calls the background launch's completion handler.
    public func waitForCompletionHandler(timeout: TimeInterval) -> Bool {
        completed.wait(timeout: .now() + timeout) == .success
    }
}
