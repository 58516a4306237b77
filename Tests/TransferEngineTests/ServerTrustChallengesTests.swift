import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX
import TransferTransport

/// Server trust built with no daemon (`SessionParts`): how a task's transfer will judge its
/// server. A key the app accepted pins its origin only (S3.6); the roots installed on the
/// simulated device are trusted for every task once read.
@Suite final class ServerTrustChallengesTests {
    let fixture: SessionParts

    init() throws {
        fixture = try SessionParts("server-trust")
    }

    private func download(_ url: String) throws -> TaskRecord {
        try fixture.session.createTask(TaskCreation(kind: .download, request: RequestRecord(url: url)), inBackground: false, pendingFailure: nil, at: fixture.parts.clock.now)
    }

    @Test("A server key the app accepted pins that origin only; the roots installed on the device are trusted for every task once read")
    func policies() throws {
        // The roots come from a file of the test's own, as `transferd --trusted-roots` names one:
        // the container's file would need root to own it.
        let rootsFile = fixture.container.root.appendingPathComponent("roots.pem").path
        let trust = ServerTrustChallenges(surroundings: fixture.surroundings, layout: fixture.container.layout,
                                          root: try RootDirectory.open(fixture.container.root.path),
                                          log: fixture.container.log, waker: fixture.parts.multi.waker,
                                          trustedRootsFile: rootsFile)
        let pin = "sha256//" + Data(repeating: 7, count: 32).base64EncodedString() // libcurl's form, of a made-up key
        let session = fixture.session
        let accepted = try download("https://127.0.0.1:8443/a")
        let otherPort = try download("https://127.0.0.1:9443/a")
        let plain = try download("http://127.0.0.1:8443/a")
        #expect(trust.tlsPolicy(for: accepted, in: session).acceptedPublicKeyPin == nil, "nothing accepted yet")

        try session.acceptServerKey(AcceptedServerKey(scheme: "https", host: "127.0.0.1", port: 8443, pin: pin))
        #expect(trust.tlsPolicy(for: accepted, in: session).acceptedPublicKeyPin == pin)
        #expect(trust.tlsPolicy(for: otherPort, in: session).acceptedPublicKeyPin == nil, "another port is another server")
        #expect(trust.tlsPolicy(for: plain, in: session).acceptedPublicKeyPin == nil, "another scheme is another origin")

        let root = Data([0x30, 0x03, 0x02, 0x01, 0x07]) // read as bytes only: no certificate is verified here
        #expect(FileManager.default.createFile(atPath: rootsFile, contents: Data(CertificatePEM.pem(of: root).utf8),
                                               attributes: [.posixPermissions: 0o600]))
        #expect(trust.tlsPolicy(for: otherPort, in: session).extraAnchors.isEmpty, "not read yet")
        trust.loadDeviceRoots()
        #expect(trust.tlsPolicy(for: otherPort, in: session).extraAnchors == [root])
        #expect(trust.tlsPolicy(for: accepted, in: session).extraAnchors == [root])
        #expect(trust.tlsPolicy(for: accepted, in: session).acceptedPublicKeyPin == pin)
    }
}
