import Testing
import TransferContainer
@testable import TransferTransport

/// When a `206` may continue the bytes on disk: only under the validator they were fetched
/// under, compared strongly; anything else restarts the download (never a mixed file).
@Suite struct ResumeValidationTests {
    private static let date1 = "Sun, 22 Nov 2026 10:00:00 GMT"
    private static let date2 = "Sun, 22 Nov 2026 11:00:00 GMT"

    private func continues(_ sent: Validator?, _ answered: Validator?) -> Bool {
        ResumeValidation.continues(sent: sent, answered: answered)
    }

    @Test("A strong ETag continues only under the identical strong ETag")
    func entityTags() {
        let v1 = Validator(entityTag: "\"v1\"", lastModified: Self.date1)
        #expect(continues(v1, Validator(entityTag: "\"v1\"", lastModified: Self.date1)))
        #expect(continues(v1, Validator(entityTag: "\"v1\"", lastModified: Self.date2)), "the tag decides, not the date")
        #expect(!continues(v1, Validator(entityTag: "\"v2\"", lastModified: Self.date1)), "another version")
        #expect(!continues(v1, Validator(entityTag: "W/\"v1\"", lastModified: Self.date1)), "a weak tag never matches a range")
        #expect(!continues(v1, Validator(entityTag: nil, lastModified: Self.date1)), "a 206 without its ETag is a mismatch")
        #expect(!continues(v1, nil), "a 206 with no validator is a mismatch")
        #expect(!continues(v1, Validator(entityTag: "\"V1\"", lastModified: nil)), "tags compare byte for byte")
    }

    @Test("A date continues only under the identical Last-Modified")
    func dates() {
        let dated = Validator(entityTag: nil, lastModified: Self.date1)
        #expect(continues(dated, Validator(entityTag: nil, lastModified: Self.date1)))
        #expect(!continues(dated, Validator(entityTag: nil, lastModified: Self.date2)), "modified since")
        #expect(!continues(dated, Validator(entityTag: "\"v1\"", lastModified: nil)), "no Last-Modified to compare")
        #expect(!continues(dated, nil))
        // A weak tag is not sent as If-Range: the date is, and the date decides.
        let weak = Validator(entityTag: "W/\"a\"", lastModified: Self.date1)
        #expect(continues(weak, Validator(entityTag: "W/\"b\"", lastModified: Self.date1)))
        #expect(!continues(weak, Validator(entityTag: "W/\"a\"", lastModified: Self.date2)))
    }

    @Test("Nothing sent as If-Range continues nothing")
    func nothingSent() {
        #expect(!continues(nil, Validator(entityTag: "\"v1\"", lastModified: Self.date1)))
        #expect(!continues(Validator(entityTag: "W/\"v1\"", lastModified: nil), Validator(entityTag: "W/\"v1\"", lastModified: nil)))
    }
}
