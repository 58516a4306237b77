import Foundation
import TestPeers
import Testing
import TransferContainer

/// A presented chain judged again offline against anchors (what `SecTrustSetAnchorCertificates`
/// and `SecTrustEvaluateWithError` do for an app): each test certificate gets Apple's code.
@Suite struct OfflineTrustTests {
    @Test("Against the test CA: its server is trusted; expired, not yet valid and wrong-host chains get -1201, -1204 and -1202; a self-signed or other CA's chain -1203 or -1202")
    func againstTheTestCA() throws {
        let certificates = try TestCertificates.shared.get()
        let expected: [TestCertificates.Kind: Int?] = [.trusted: nil, .expired: -1201, .notYetValid: -1204, .wrongHost: -1202, .selfSigned: -1203, .otherCA: -1202]
        for (kind, code) in expected {
            let leaf = try #require(certificates.der(kind))
            let judged = ServerTrustRecord(host: "127.0.0.1", port: 443, certificates: [leaf], failureCode: -1202).evaluated(anchors: [certificates.caDER], anchorsOnly: true)
            #expect(judged.failureCode == code, "\(kind): \(judged.failureReason ?? "trusted")")
        }
    }

    @Test("A bad date and an unknown authority at once: -1202 (untrusted), not -1201 or -1204, as Apple's CFNetwork answers a chain that does not verify")
    func badDateOfAnUnknownAuthority() throws {
        let certificates = try TestCertificates.shared.get()
        for kind in [TestCertificates.Kind.expiredOtherCA, .notYetValidOtherCA] {
            let leaf = try #require(certificates.der(kind))
            let record = ServerTrustRecord(host: "127.0.0.1", port: 443, certificates: [leaf])
            for anchorsOnly in [true, false] {
                let judged = record.evaluated(anchors: [certificates.caDER], anchorsOnly: anchorsOnly)
                #expect(judged.failureCode == -1202 && kind.expectedCode == -1202,
                        "\(kind): \(judged.failureReason ?? "trusted")")
            }
        }
    }

    @Test("Without anchors only the system's store judges: the test CA's server is not trusted there; with the store added back and the CA, it is")
    func systemStore() throws {
        let certificates = try TestCertificates.shared.get()
        let leaf = try #require(certificates.der(.trusted))
        let record = ServerTrustRecord(host: "127.0.0.1", port: 443, certificates: [leaf])
        #expect(record.evaluated(anchors: [], anchorsOnly: false).failureCode == -1202)
        #expect(record.evaluated(anchors: [certificates.caDER], anchorsOnly: false).failureCode == nil)
    }

    @Test("Bytes that are not certificates, an empty chain, a certificate with bytes after it: not trusted, -1200 or -1202, no trap")
    func hostileBytes() throws {
        let certificates = try TestCertificates.shared.get()
        let leaf = try #require(certificates.der(.trusted))
        for chain in [[Data()], [Data("garbage".utf8)], [], [leaf + Data([0])], [Data(repeating: 0x30, count: 10_000)]] {
            let judged = ServerTrustRecord(host: "127.0.0.1", port: 443, certificates: chain).evaluated(anchors: [certificates.caDER], anchorsOnly: true)
            #expect(judged.failureCode != nil)
        }
        let badAnchor = ServerTrustRecord(host: "127.0.0.1", port: 443, certificates: [leaf]).evaluated(anchors: [Data("x".utf8)], anchorsOnly: true)
        #expect(badAnchor.failureCode != nil)
    }
}
