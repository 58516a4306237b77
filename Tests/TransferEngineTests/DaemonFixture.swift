import Foundation
import TransferContainer
import TransferTransport
@testable import TransferEngine
import TransferPOSIX

/// A daemon that is built but not run, over a container of its own, with a set clock and one
/// session of the stand-in host app: for unit tests of the daemon's parts, which a test calls
/// directly on its thread. Nothing listens and no loop turns; transfers that start are only
/// handed to libcurl.
final class DaemonFixture {
    static let family = (try? BundleIdentifier("com.example.host"))!
    static let group = (try? BundleIdentifier("group.com.example.transfers"))!
    let root: URL
    let clock = ManualClock(Date(timeIntervalSince1970: 1_700_000_000))
    let daemon: TransferDaemon
    let session: DaemonSession
    let identity = AppIdentity(bundleIdentifier: DaemonFixture.family, kind: .app, containingApp: DaemonFixture.family, containingAppExecutable: "host-app", appGroups: [DaemonFixture.group])

    init(_ configure: (inout TransferDaemon.Options, inout SessionConfiguration) -> Void = { _, _ in }) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-parts-\(UUID().uuidString)")
        var options = TransferDaemon.Options(layout: ContainerLayout(root: root))
        options.echoLevel = nil
        options.clock = clock
        var configuration = SessionConfiguration()
        configuration.sharedContainerIdentifier = Self.group
        configuration.sessionSendsLaunchEvents = true
        configure(&options, &configuration)
        daemon = try TransferDaemon(options: options)
        let record = SessionRecord(identifier: try SessionIdentifier("com.example.host.background"), owner: Self.family, family: Self.family, configuration: configuration, createdAt: clock.now)
        session = try DaemonSession(layout: options.layout, log: daemon.log, record: record)
        daemon.sessions[session.key] = session
    }

    deinit {
        try? FileManager.default.removeItem(at: root)
    }

    /// A download task to a port nobody listens on, created and resumed as the app would now.
    func createDownload(inBackground: Bool = false, url: String = "http://127.0.0.1:9/file") throws -> TaskRecord {
        let creation = TaskCreation(kind: .download, request: RequestRecord(url: url))
        var task = try session.createTask(creation, inBackground: inBackground, pendingFailure: nil, at: clock.now)
        task.state = .running
        session.update(task)
        return task
    }

    func key(_ task: TaskRecord) -> TaskKey { TaskKey(session: session.key, task: task.taskIdentifier) }

    /// Whether a transfer of the task was handed to libcurl.
    func isTransferring(_ task: TaskRecord) -> Bool { daemon.transfers.transfersByTask[key(task)] != nil }
}
