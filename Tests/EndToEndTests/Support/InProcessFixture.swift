import Foundation
import BackgroundTransfer
import LoopbackServer
import TransferPOSIX

/// What every in-process suite needs: its own container, a loopback server, optionally a
/// daemon, and this process bootstrapped as the test app. Ends them all in `tearDown`.
final class InProcessFixture: @unchecked Sendable {
    let container: TestContainer
    let server: LoopbackServer
    /// The sessions `session(_:delegate:)` opened, invalidated in `tearDown`: one left open
    /// would reconnect to the container's daemon when `tearDown` ends it, and so launch a new
    /// daemon that outlives the test.
    private let opened = Locked<[(session: URLSession, delegate: RecordingDelegate)]>([])

    init(startDaemon: Bool = true) throws {
        container = try TestContainer()
        server = try LoopbackServer()
        if startDaemon { _ = try DaemonUnderTest.start(container) }
        AppEnvironment.bootstrap(identity: InProcess.app, layout: container.layout, isForeground: true)
    }

    func tearDown() {
        server.stop()
        for (session, delegate) in opened.withLock({ $0 }) {
            session.invalidateAndCancel()
            _ = delegate.wait(timeout: 10) { if case .invalid = $0 { true } else { false } }
        }
        container.tearDown()
    }

    /// A background session in the test app group that never relaunches this test process.
    func session(_ identifier: String, delegate: RecordingDelegate, configure: (URLSessionConfiguration) -> Void = { _ in }) -> URLSession {
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        configure(configuration)
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        opened.withLock { $0.append((session, delegate)) }
        return session
    }
}

/// The base of the in-process suites: one fixture per test (Swift Testing makes a new
/// instance for each), torn down when the instance goes.
class InProcessSuite: @unchecked Sendable {
    let fixture: InProcessFixture
    var container: TestContainer { fixture.container }
    var server: LoopbackServer { fixture.server }

    /// Suites that start their own daemons override this with false.
    class var startsDaemon: Bool { true }

    required init() throws {
        fixture = try InProcessFixture(startDaemon: Self.startsDaemon)
    }

    deinit {
        fixture.tearDown()
    }
}

/// `session.getAllTasks`, waited for: the tasks, or nil when the completion handler was not
/// called within `timeout`.
func allTasks(_ session: URLSession, timeout: TimeInterval = 10) -> [URLSessionTask]? {
    let done = DispatchSemaphore(value: 0)
    let box = Locked<[URLSessionTask]>([])
    session.getAllTasks { tasks in
        box.withLock { $0 = tasks }
        done.signal()
    }
    guard done.wait(timeout: .now() + timeout) == .success else { return nil }
    return box.withLock { $0 }
}
