/// The IETF draft "Resumable Uploads for HTTP" (interop versions 3, 5 and 6) as Apple's
/// reference server, NIOResumableUpload in swift-nio-extras, understands it: which kind of
/// request a head is, and the heads of the protocol's own responses. Stateless; callable
/// from any thread.
///
/// Version 3 says `Upload-Incomplete: ?1` where 5 and 6 say `Upload-Complete: ?0`;
/// version 6 also wants `Content-Type: application/partial-upload` on every PATCH.
enum ResumableUploadProtocol {
    static let supportedVersions: Set<Int> = [3, 5, 6]
    static let latestVersion = 6
    /// Resume paths are `/.uploads/<token>`; the server owns every path under this prefix.
    static let resumePathPrefix = "/.uploads/"
    static let partialUploadContentType = "application/partial-upload"

    enum Field {
        static let version = "Upload-Draft-Interop-Version"
        static let complete = "Upload-Complete"
        static let incomplete = "Upload-Incomplete"
        static let offset = "Upload-Offset"
        static let length = "Upload-Length"
        static let limit = "Upload-Limit"
    }

    /// What a request carrying the version header asks for.
    enum Request: Equatable {
        /// PUT/POST to an upload route with a completeness header: starts an upload.
        case creation(complete: Bool, uploadLength: Int64?)
        /// HEAD on a resume path.
        case offsetRetrieval
        /// PATCH on a resume path.
        case append(offset: Int64, complete: Bool, uploadLength: Int64?)
        /// DELETE on a resume path.
        case cancellation
        case options
    }

    /// Why a request is refused with 400 (NIOResumableUpload's `InvalidRequestError`).
    enum InvalidRequest: Error, Equatable {
        case unsupportedVersion
        case unknownMethod
        /// A creation whose `Upload-Offset` is not 0.
        case nonzeroCreationOffset
        case missingHeaderField(String)
        case extraHeaderField
    }

    /// Classifies a request. Nil when it is not part of the protocol: no version header, or
    /// a PUT/POST without a completeness header (then it is a plain upload).
    static func identify(_ head: RequestHead, onResumePath: Bool,
                         versions: Set<Int>) throws(InvalidRequest) -> (Request, version: Int)? {
        guard let versionValue = head.headers[Field.version] else { return nil }
        guard let version = Int(versionValue), versions.contains(version) else {
            throw .unsupportedVersion
        }
        let complete = version >= 5
            ? head.headers[Field.complete].flatMap(structuredBool)
            : head.headers[Field.incomplete].flatMap(structuredBool).map { !$0 }
        let offset = head.headers[Field.offset].flatMap(structuredInteger)
        let uploadLength = head.headers[Field.length].flatMap(structuredInteger)
        let noExtras = complete == nil && offset == nil && uploadLength == nil

        if head.method == "OPTIONS" {
            guard noExtras else { throw .extraHeaderField }
            return (.options, version)
        }
        if onResumePath {
            switch head.method {
            case "HEAD":
                guard noExtras else { throw .extraHeaderField }
                return (.offsetRetrieval, version)
            case "PATCH":
                guard let offset else { throw .missingHeaderField(Field.offset) }
                if version >= 6 && head.headers["Content-Type"] != partialUploadContentType {
                    throw .missingHeaderField("Content-Type: \(partialUploadContentType)")
                }
                // No completeness header on an append means it is the last one.
                return (.append(offset: offset, complete: complete ?? true, uploadLength: uploadLength), version)
            case "DELETE":
                guard noExtras else { throw .extraHeaderField }
                return (.cancellation, version)
            default:
                throw .unknownMethod
            }
        }
        guard let complete else { return nil }
        if let offset, offset != 0 { throw .nonzeroCreationOffset }
        return (.creation(complete: complete, uploadLength: uploadLength), version)
    }

    // MARK: Response heads

    /// `104 Upload Resumption Supported`, sent before reading a creation's body.
    static func resumptionSupported(location: String, version: Int) -> ResponseHead {
        var head = ResponseHead(status: 104)
        head.add(Field.version, String(version))
        head.add("Location", location)
        return head
    }

    /// The fields that state where an upload stands, added to several responses.
    static func addState(to head: inout ResponseHead, offset: Int64, complete: Bool, version: Int) {
        head.add(Field.version, String(version))
        if version >= 5 {
            head.add(Field.complete, complete ? "?1" : "?0")
        } else {
            head.add(Field.incomplete, complete ? "?0" : "?1")
        }
        head.add(Field.offset, String(offset))
    }

    /// Answer to HEAD on a resume path.
    static func offsetRetrieved(offset: Int64, complete: Bool, version: Int) -> ResponseHead {
        var head = ResponseHead(status: 204)
        addState(to: &head, offset: offset, complete: complete, version: version)
        head.add("Cache-Control", "no-store")
        return head
    }

    /// Answer to a request that ended before the upload did. `location` only for creation.
    static func incomplete(offset: Int64, location: String?, version: Int) -> ResponseHead {
        var head = ResponseHead(status: 201)
        addState(to: &head, offset: offset, complete: false, version: version)
        if let location { head.add("Location", location) }
        head.add("Content-Length", "0")
        return head
    }

    static func conflict(offset: Int64, complete: Bool, version: Int) -> ResponseHead {
        var head = ResponseHead(status: 409)
        addState(to: &head, offset: offset, complete: complete, version: version)
        head.add("Content-Length", "0")
        return head
    }

    static func options(version: Int) -> ResponseHead {
        var head = ResponseHead(status: 200)
        head.add(Field.version, String(version))
        head.add(Field.limit, "min-size=0")
        head.add("Content-Length", "0")
        return head
    }

    static func cancelled(version: Int) -> ResponseHead {
        var head = ResponseHead(status: 204)
        head.add(Field.version, String(version))
        return head
    }

    /// A bodiless error answer (400, 404) carrying the version, as the reference server sends.
    static func failure(_ status: Int, version: Int) -> ResponseHead {
        var head = ResponseHead(status: status)
        head.add(Field.version, String(version))
        head.add("Content-Length", "0")
        return head
    }

    // MARK: Structured field items (RFC 8941), parameters ignored

    /// `?1` / `?0`; nil when the value is not a boolean item.
    static func structuredBool(_ value: String) -> Bool? {
        switch bareItem(value) {
        case "?1": true
        case "?0": false
        default: nil
        }
    }

    /// An integer item: optional `-`, 1 to 15 digits.
    static func structuredInteger(_ value: String) -> Int64? {
        let item = bareItem(value)
        let digits = item.hasPrefix("-") ? item.dropFirst() : item[...]
        guard !digits.isEmpty, digits.count <= 15,
              digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int64(item)
    }

    /// The item without parameters (`;key=value`) or surrounding spaces.
    private static func bareItem(_ value: String) -> String {
        String(value.prefix { $0 != ";" }).trimmingHTTPWhitespace()
    }
}
