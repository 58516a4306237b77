import Foundation
import Testing
import TransferContainer
import TransferCoding

/// A refusal the client library acts on is told by its typed reason, which crosses the socket
/// with the failure; a failure written before the reason existed still reads, with none.
@Suite struct RefusalTests {
    @Test("A 'session not open' refusal keeps its reason through encoding and decoding; its words may change freely")
    func reasonSurvivesTheWire() throws {
        var refused = TransferFailure.sessionNotOpen("com.example.host.background")
        refused.message = "reworded"
        let decoded = try RecordCoding.decode(TransferFailure.self, from: RecordCoding.encodeCompact(refused))
        #expect(decoded.refusal == .sessionNotOpen)
        #expect(decoded.code == TransferFailure.requestRefused)
        #expect(decoded.subject == "com.example.host.background")
    }

    @Test("A failure without a reason (older daemons and records) decodes with none; an unknown reason is an error, not a guess")
    func absentAndUnknownReasons() throws {
        let old = Data(#"{"code":-1011,"message":"session x is not open in this process"}"#.utf8)
        #expect(try RecordCoding.decode(TransferFailure.self, from: old).refusal == nil)
        let unknown = Data(#"{"code":-1011,"message":"m","refusal":"somethingElse"}"#.utf8)
        #expect(throws: (any Error).self) { try RecordCoding.decode(TransferFailure.self, from: unknown) }
    }
}
