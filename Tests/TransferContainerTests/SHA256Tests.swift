import Foundation
import Testing
import TransferContainer

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
        var random = SeededGenerator(seed: UInt64(size) &+ 17)
        let data = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &random) })
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

    @Test("hexDigest(ofFile:) equals sha256sum of the same file")
    func fileDigest() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var random = SeededGenerator(seed: 20_231_114)
        // Over three 1 MiB reads, not a multiple of 64.
        let data = Data((0..<(3 << 20) + 17).map { _ in UInt8.random(in: 0...255, using: &random) })
        let path = directory.path("payload.bin")
        try data.write(to: URL(fileURLWithPath: path))
        let output = try #require(try await runTool("/usr/bin/sha256sum", [path], in: directory), "sha256sum did not finish")
        let expected = String(output.prefix(64))
        #expect(try SHA256.hexDigest(ofFile: path) == expected)
        #expect(SHA256.hexDigest(of: data) == expected)
    }

    @Test("hexDigest(ofFile:) of an empty file is the empty digest; of a missing file it throws")
    func fileEdgeCases() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let empty = directory.path("empty")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        #expect(try SHA256.hexDigest(ofFile: empty) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(throws: Errno.self) { try SHA256.hexDigest(ofFile: directory.path("missing")) }
    }
}
