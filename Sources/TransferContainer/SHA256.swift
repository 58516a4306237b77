import Foundation
internal import CSHA256

/// SHA-256 (FIPS 180-4), streaming. Used to check delivered files against served ones (demo,
/// tests, benchmark). A value type; each instance belongs to one thread.
public struct SHA256 {
    private var context = csha256_context()

    public init() {
        csha256_init(&context)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        csha256_update(&context, base, bytes.count)
    }

    public mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest; the hasher starts over afterwards.
    public mutating func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        csha256_final(&context, &digest)
        csha256_init(&context)
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
}
