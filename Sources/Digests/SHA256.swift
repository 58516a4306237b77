internal import CLibcrypto
import Foundation
import TransferPOSIX

/// SHA-256, streaming, by the system's libcrypto: the pin of a server's public key (what an
/// app accepts in a server-trust challenge), and, for the server, the demo and the tests,
/// delivered files checked against served ones. A value: a copy goes
/// on from where the original was, independently (copy on write). Each instance belongs to
/// one thread.
public struct SHA256 {
    private var context = Context()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        guard clibcrypto_sha256_update(context.digest, base, bytes.count) == 1 else { Context.refused("update") }
    }

    public mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest; the hasher starts over afterwards.
    public mutating func finalize() -> [UInt8] {
        if !isKnownUniquelyReferenced(&context) { context = context.copy() }
        var digest = [UInt8](repeating: 0, count: 32)
        guard clibcrypto_sha256_final(context.digest, &digest) == 1 else { Context.refused("final") }
        return digest
    }

    public static func hexDigest(ofFile path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw Errno(ENOENT, "open", path: path) }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(chunk) }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    public static func hexDigest(of data: Data) -> String {
        var hasher = SHA256()
        hasher.update(data)
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    /// libcrypto's running digest, freed with its last owner.
    private final class Context {
        let digest: OpaquePointer

        init() {
            guard let digest = clibcrypto_sha256_new() else { Self.refused("new") }
            self.digest = digest
        }

        private init(copying other: Context) {
            guard let digest = clibcrypto_sha256_copy(other.digest) else { Self.refused("copy") }
            self.digest = digest
        }

        func copy() -> Context { Context(copying: self) }

        deinit { clibcrypto_sha256_free(digest) }

        /// libcrypto fails SHA-256 only when it cannot allocate: out of memory, as when Swift
        /// cannot allocate, the process cannot go on.
        static func refused(_ call: String) -> Never {
            fatalError("libcrypto refused SHA-256 \(call) (out of memory)")
        }
    }
}
