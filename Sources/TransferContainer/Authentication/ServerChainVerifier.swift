internal import CLibcrypto
import Foundation

/// A server's chain verified offline by libcrypto, as a TLS client verifies it: for an app
/// that judges a server-trust challenge against anchors of its own. Any thread.
enum ServerChainVerifier {
    struct Outcome {
        var verified: Bool
        /// OpenSSL's X509_V_ERR_* code; -1 when a certificate did not parse.
        var verifyError: Int
        var reason: String
    }

    static func verify(_ certificates: [Data], anchors: [Data], useSystemStore: Bool, host: String?) -> Outcome {
        guard !certificates.isEmpty else { return Outcome(verified: false, verifyError: -1, reason: "the server presented no certificate") }
        var error = 0
        let result = withPointers(certificates) { chain, lengths in
            withPointers(anchors) { roots, rootLengths in
                clibcrypto_verify_server_chain(chain, lengths, certificates.count, roots, rootLengths, anchors.count, useSystemStore ? 1 : 0, host, &error)
            }
        }
        if result < 0 { return Outcome(verified: false, verifyError: -1, reason: "a certificate of the chain or an anchor does not parse") }
        return Outcome(verified: result == 1, verifyError: error, reason: String(cString: clibcrypto_verify_error_string(error)))
    }

    /// Runs `body` with C arrays of the buffers' base addresses and lengths, valid for its duration.
    private static func withPointers<R>(_ buffers: [Data], _ body: (UnsafePointer<UnsafePointer<UInt8>?>?, UnsafePointer<Int>?) -> R) -> R {
        let copies = buffers.map { [UInt8]($0) }
        let lengths = copies.map(\.count)
        var pointers: [UnsafeMutablePointer<UInt8>] = []
        defer { pointers.forEach { $0.deallocate() } }
        for copy in copies {
            let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, copy.count))
            pointer.initialize(from: copy, count: copy.count)
            pointers.append(pointer)
        }
        let bases: [UnsafePointer<UInt8>?] = pointers.map { UnsafePointer($0) }
        return bases.withUnsafeBufferPointer { bases in
            lengths.withUnsafeBufferPointer { lengths in body(bases.baseAddress, lengths.baseAddress) }
        }
    }
}
