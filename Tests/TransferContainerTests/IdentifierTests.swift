import Foundation
import Testing
import TransferContainer
import TransferCoding

@Suite("Session and bundle identifiers")
struct IdentifierTests {
    static let valid = ["com.example.host.fetch.background", "a", "A-b_c.9", String(repeating: "x", count: 200)]

    /// Refused identifiers and a word the reason must contain.
    static let invalid: [(String, String)] = [
        ("", "empty"),
        (".", "starts with"),
        ("..", "\"..\""),
        ("a..b", "\"..\""),
        ("a/b", "path separator"),
        ("/abs", "path separator"),
        ("\\x", "path separator"),
        (".hidden", "starts with \".\""),
        ("-flag", "starts with \"-\""),
        (String(repeating: "a", count: 300), "300 bytes"),
        (String(repeating: "b", count: 201), "201 bytes"),
        ("café", "U+00E9"),
        ("日本", "U+65E5"),
        ("a\u{301}", "U+0061 U+0301"), // a + combining accent: one character, not plain ASCII
        ("emoji😀", "U+1F600"),
        ("tab\there", "U+0009"),
        ("line\nbreak", "U+000A"),
        ("nul\u{0}byte", "U+0000"),
        ("del\u{7F}", "U+007F"),
        ("space here", "U+0020"),
        ("colon:x", "U+003A"),
    ]

    @Test("valid identifiers are accepted and keep their text", arguments: valid)
    func accepts(_ text: String) throws {
        #expect(try SessionIdentifier(text).rawValue == text)
        #expect(try BundleIdentifier(text).rawValue == text)
        #expect(try SessionIdentifier(text).description == text)
    }

    @Test("a 200-byte identifier is accepted, a 201-byte one refused")
    func lengthLimit() throws {
        #expect(SessionIdentifier.maximumLength == 200)
        let atLimit = String(repeating: "x", count: 200)
        #expect(atLimit.utf8.count == 200)
        _ = try SessionIdentifier(atLimit)
        _ = try BundleIdentifier(atLimit)
        let over = atLimit + "y"
        #expect(throws: IdentifierError.self) { try SessionIdentifier(over) }
        #expect(throws: IdentifierError.self) { try BundleIdentifier(over) }
    }

    @Test("invalid identifiers are refused with a description naming the identifier and the reason", arguments: invalid)
    func refuses(_ text: String, _ reasonWord: String) throws {
        let sessionError = try #require(throws: IdentifierError.self) { try SessionIdentifier(text) }
        #expect(sessionError.identifier == text)
        #expect(sessionError.kind == "session identifier")
        #expect(sessionError.reason.contains(reasonWord), "reason: \(sessionError.reason)")
        let description = sessionError.description
        #expect(description.contains("session identifier"))
        #expect(description.contains(sessionError.reason))
        // Long identifiers are shown by their start; short ones in full.
        #expect(description.contains("\"" + String(text.prefix(60))), "description: \(description)")

        let bundleError = try #require(throws: IdentifierError.self) { try BundleIdentifier(text) }
        #expect(bundleError.kind == "bundle identifier")
        #expect(bundleError.description.contains("bundle identifier"))
        #expect(bundleError.reason == sessionError.reason)
    }

    @Test("a long identifier is cut in the description, not the whole 300 characters")
    func longDescription() throws {
        let text = String(repeating: "q", count: 300)
        let error = try #require(throws: IdentifierError.self) { try SessionIdentifier(text) }
        #expect(error.description.contains(String(repeating: "q", count: 60) + "…"))
        #expect(!error.description.contains(String(repeating: "q", count: 61)))
    }

    @Test("identifiers encode as plain JSON strings and decode back")
    func jsonRoundTrip() throws {
        let data = try JSONEncoder().encode([sampleSession])
        #expect(String(decoding: data, as: UTF8.self) == "[\"com.example.host.fetch.background\"]")
        #expect(try JSONDecoder().decode([SessionIdentifier].self, from: data) == [sampleSession])
        #expect(try JSONDecoder().decode([BundleIdentifier].self, from: Data("[\"com.example.host\"]".utf8)) == [sampleFamily])
    }

    @Test("decoding an invalid identifier fails", arguments: ["../etc", "", ".hidden", "a b"])
    func jsonRefusesBadIdentifier(_ text: String) throws {
        let json = try JSONEncoder().encode([text])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([SessionIdentifier].self, from: json) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([BundleIdentifier].self, from: json) }
    }

    @Test("a record file holding a bad identifier cannot be read")
    func recordWithBadIdentifier() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let good = String(decoding: try RecordCoding.encoder().encode(sampleSessionRecord()), as: UTF8.self)
        #expect(good.contains("\"com.example.host.fetch.background\""))

        let badSession = good.replacingOccurrences(of: "\"com.example.host.fetch.background\"", with: "\"..\\/..\\/escape\"")
        let path = directory.path("session.json")
        try Data(badSession.utf8).write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: RecordError.self) { try RecordCoding.read(SessionRecord.self, from: path) }
        #expect(error.description.contains(path))
        guard case .corrupt = error else {
            Issue.record("expected .corrupt, got \(error)")
            return
        }

        let badOwner = good.replacingOccurrences(of: "\"com.example.host.fetch\"", with: "\"-rf\"")
        try Data(badOwner.utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: RecordError.self) { try RecordCoding.read(SessionRecord.self, from: path) }

        // The unmodified record still reads.
        try Data(good.utf8).write(to: URL(fileURLWithPath: path))
        #expect(try RecordCoding.read(SessionRecord.self, from: path) == sampleSessionRecord())
    }

    @Test("bundle identifiers sort by their text")
    func bundleOrder() throws {
        let names = ["com.b", "com.a.z", "com.a"]
        let sorted = try names.map(BundleIdentifier.init).sorted().map(\.rawValue)
        #expect(sorted == ["com.a", "com.a.z", "com.b"])
    }
}
