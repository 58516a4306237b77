import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import StandInSupport
import ContainerInspection
import TransferPOSIX

/// The daemon believes a process only as far as the executable behind its pid declares
/// (`Entitlements`, read from `/proc/<pid>/exe`), and lets it open only its own bundle's sessions.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class TrustTests: InProcessSuite, @unchecked Sendable {
    /// Opens a session while this process claims `identity`, and returns it with its delegate.
    private func open(as identity: AppIdentity, group: BundleIdentifier) -> (URLSession, RecordingDelegate) {
        AppEnvironment.bootstrap(identity: identity, layout: container.layout, isForeground: true)
        defer { AppEnvironment.bootstrap(identity: InProcess.app, layout: container.layout, isForeground: true) }
        let delegate = RecordingDelegate()
        let configuration = URLSessionConfiguration.background(withIdentifier: "\(identity.bundleIdentifier).claimed")
        configuration.sharedContainerIdentifier = group.rawValue
        configuration.sessionSendsLaunchEvents = false
        return (URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil), delegate)
    }

    @Test("A process claiming a bundle its executable does not declare is refused, with a log line naming its pid and executable")
    func foreignBundleRefused() throws {
        // (SwiftPM links the stand-in executables' code into the test binary, so it declares
        // their bundles too; an intruder's bundle is declared by no executable at all.)
        let intruderBundle = try BundleIdentifier("com.example.intruder")
        let intruder = AppIdentity(bundleIdentifier: intruderBundle, kind: .app, containingApp: intruderBundle, containingAppExecutable: "intruder", appGroups: [InProcess.group])
        let (session, delegate) = open(as: intruder, group: InProcess.group)
        let error = session.invalidationError as NSError?
        #expect(error?.code == -1011)
        #expect(error?.localizedDescription.contains("may not act as com.example.intruder") == true, "\(String(describing: error))")
        #expect(delegate.wait { $0 == .invalid(code: -1011) }, "the delegate hears it: \(delegate.calls)")
        let refusal = container.waitForLog { $0.process == "transferd" && $0.category == "trust" }
        #expect(refusal?.message.contains("process \(getpid())") == true, "\(String(describing: refusal?.message))")
        #expect(refusal?.message.contains(ProcessSpawner.currentExecutable) == true, "\(String(describing: refusal?.message))")
        #expect(ContainerSnapshot.read(container.layout).sessions.isEmpty, "no session was made for the refused process")

        // The daemon goes on serving this process under the identity it is entitled to.
        server.serve("/after.bin", data: testPayload(size: 4096))
        let ownDelegate = RecordingDelegate()
        let own = fixture.session("after-refusal", delegate: ownDelegate)
        #expect(own.invalidationError == nil)
        let task = own.downloadTask(with: server.url(for: "/after.bin"))
        task.resume()
        #expect(ownDelegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) })
        own.invalidateAndCancel()
    }

    @Test("A declared bundle claiming an app group its executable does not declare is refused")
    func undeclaredAppGroupRefused() throws {
        var greedy = InProcess.app
        let stolen = StandInIdentities.appGroup
        greedy.appGroups.append(stolen)
        let (session, delegate) = open(as: greedy, group: stolen)
        #expect((session.invalidationError as NSError?)?.code == -1011)
        #expect(delegate.wait { $0 == .invalid(code: -1011) })
        #expect(container.waitForLog { $0.category == "trust" && $0.message.contains("group.com.example.transfers") } != nil)
    }
}
}

/// Sessions belong to the bundle that made them (and to its containing app, S1.6).
@Suite(.timeLimit(.minutes(20)))
struct SessionOwnershipTests {
    @Test("The share extension cannot open the fetch extension's session: a clear error, and the owner's task goes on")
    func otherBundlesSessionRefused() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var slow = RouteOptions()
        slow.bytesPerSecond = 512 << 10
        server.serve("/owned.bin", data: testPayload(size: 1 << 20), options: slow)
        _ = try DaemonUnderTest.start(container)

        let owner = try Executable.fetchExtension.run(["download", server.url(for: "/owned.bin").absoluteString], in: container)
        try #require(owner.status == 0, "\(owner.stderr)")
        let intruder = try Executable.shareExtension.run(["download", server.url(for: "/owned.bin").absoluteString, "--session", "com.example.host.fetch.background"], in: container)
        #expect(intruder.status == 2)
        #expect(intruder.stderr.contains("belongs to com.example.host.fetch"), "\(intruder.stderr)")
        let tasks = ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks)
        #expect(tasks.count == 1, "only the owner's task exists: \(tasks)")
        #expect(container.waitForCompletionHandler(of: "host-app") != nil, "the owner's download is delivered")
    }
}
