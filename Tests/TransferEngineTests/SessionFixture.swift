import Foundation
import TransferContainer
@testable import TransferEngine
import TransferLogging
import TransferPOSIX

/// A container of the test's own holding one session, and no daemon: for unit tests of one
/// part, built with a stub of its surroundings. The container goes when the fixture does.
/// Used on the test's thread only.
final class SessionFixture {
    let root: URL
    let layout: ContainerLayout
    let log: TransferLog
    let session: DaemonSession

    /// - Parameter name: the start of the container's folder name, saying which test made it.
    init(_ name: String, identifier: String = "com.example.app.background", configuration: SessionConfiguration = SessionConfiguration()) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        layout = ContainerLayout(root: root)
        try layout.prepare()
        log = TransferLog(layout: layout, process: "test", subsystem: "test", echoLevel: nil)
        let family = try BundleIdentifier("com.example.app")
        let record = SessionRecord(identifier: try SessionIdentifier(identifier), owner: family, family: family,
                                   configuration: configuration, createdAt: Date(timeIntervalSince1970: 1_700_000_000))
        session = try DaemonSession(layout: layout, log: log, record: record)
    }

    deinit {
        try? FileManager.default.removeItem(at: root)
    }
}

/// `SchedulerParts` over the one session of a container of the test's own: for unit tests of
/// the challenges, delayed requests and watchers with real task records and no daemon.
final class SessionParts {
    let container: SessionFixture
    let parts: SchedulerParts
    var session: DaemonSession { container.session }
    var surroundings: SchedulerPartsStub { parts.surroundings }

    init(_ name: String) throws {
        container = try SessionFixture(name)
        parts = try SchedulerParts(layout: container.layout, root: RootDirectory.open(container.root.path), log: container.log)
    }
}
