import Foundation
import Testing
import LoopbackServer
import Digests
import TransferPOSIX

@Suite("SHA256")
struct SHA256Tests {
    static let vectors: [(String, String)] = [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ]

    @Test("FIPS 180 test vectors", arguments: vectors)
    func vector(_ message: String, _ digest: String) {
        #expect(SHA256.hexDigest(of: Data(message.utf8)) == digest)
    }

    @Test("one million \"a\"")
    func millionA() {
        #expect(SHA256.hexDigest(of: Data(repeating: 0x61, count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("finalize returns 32 bytes")
    func digestSize() {
        var hasher = SHA256()
        hasher.update(Data("abc".utf8))
        let digest = hasher.finalize()
        #expect(digest.count == 32)
        #expect(digest.prefix(4) == [0xBA, 0x78, 0x16, 0xBF])
    }

    @Test("updates in odd-sized pieces equal one update", arguments: [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 10_007])
    func incremental(_ size: Int) {
        let data = testBytes(size, seed: UInt64(size) &+ 17)
        let oneShot = SHA256.hexDigest(of: data)
        for pieces in [[1], [3, 7, 13], [63, 1, 65], [64], [5, 0, 127, 2]] {
            var hasher = SHA256()
            var offset = 0
            var index = 0
            while offset < data.count {
                let length = min(pieces[index % pieces.count], data.count - offset)
                hasher.update(data.subdata(in: offset..<(offset + length)))
                offset += length
                index += 1
                if index > data.count * 2 + 10 { break } // a piece list of zeros only would never end
            }
            hasher.update(Data()) // an empty update changes nothing
            #expect(hasher.finalize().map { String(format: "%02x", $0) }.joined() == oneShot, "pieces \(pieces), size \(size)")
        }
    }

    @Test("a copy goes on from where the original was, and neither disturbs the other")
    func copies() {
        var original = SHA256()
        original.update(Data("ab".utf8))
        var copy = original
        copy.update(Data("c".utf8))
        original.update(Data("x".utf8))
        #expect(copy.finalize().map { String(format: "%02x", $0) }.joined() == Self.vectors[1].1)
        #expect(original.finalize() == { var abx = SHA256(); abx.update(Data("abx".utf8)); return abx.finalize() }())
        // After finalize the hasher starts over.
        original.update(Data("abc".utf8))
        #expect(original.finalize().map { String(format: "%02x", $0) }.joined() == Self.vectors[1].1)
    }

    @Test("hexDigest(ofFile:) over several reads equals the digest of the same bytes")
    func fileDigest() throws {
        // Over three 1 MiB reads, not a multiple of 64.
        let file = try TempFile(size: (3 << 20) + 17, seed: 20_231_114)
        defer { file.remove() }
        #expect(try SHA256.hexDigest(ofFile: file.url.path) == SHA256.hexDigest(of: file.contents))
    }

    @Test("hexDigest(ofFile:) of an empty file is the empty digest; of a missing file it throws")
    func fileEdgeCases() throws {
        let empty = try TempFile(size: 0)
        defer { empty.remove() }
        #expect(try SHA256.hexDigest(ofFile: empty.url.path) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(throws: Errno.self) { try SHA256.hexDigest(ofFile: empty.url.path + ".missing") }
    }
}
