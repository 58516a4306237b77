import CLibcrypto
import CSHA256

/// A SHA-256 digest the `hand-written` figure times: the project's C one or libcrypto's.
/// Each instance belongs to the thread that made it.
protocol BenchDigest {
    mutating func update(_ bytes: UnsafeRawBufferPointer)
    mutating func finish() -> [UInt8]
}

extension BenchDigest {
    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }
}

/// SHA-256 by `Sources/CSHA256`.
struct CSHA256Digest: BenchDigest {
    private var context = csha256_context()

    init() {
        csha256_init(&context)
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        csha256_update(&context, base, bytes.count)
    }

    mutating func finish() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        csha256_final(&context, &digest)
        return digest
    }
}

/// SHA-256 by libcrypto, through `Sources/CLibcrypto`; freed when finished.
struct LibcryptoDigest: BenchDigest {
    private let digest = clibcrypto_sha256_new()

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        _ = clibcrypto_sha256_update(digest, base, bytes.count)
    }

    mutating func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = clibcrypto_sha256_final(digest, &out)
        clibcrypto_sha256_free(digest)
        return out
    }
}
