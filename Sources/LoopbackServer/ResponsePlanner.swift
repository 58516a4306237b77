import Foundation
import HTTPFormats

/// A decided response: its head, what body to send (if any) and how to write it.
/// Built and consumed on the connection thread.
struct ResponsePlan {
    var head: ResponseHead
    var body: Representation.Body?
    /// The slice of `body` to send.
    var range: Range<Int64> = 0..<0
    var framing: ResponseFraming = .contentLength
    var pacing = BodyPacing()
    /// Close the connection afterwards regardless of what the client asked for.
    var closeConnection = false

    /// A short `text/plain` answer such as `404 Not Found`.
    static func text(_ status: Int, _ message: String? = nil) -> ResponsePlan {
        let text = (message ?? "\(status) \(ResponseHead.reason(for: status))") + "\n"
        let data = Data(text.utf8)
        var head = ResponseHead(status: status)
        head.add("Content-Type", "text/plain; charset=utf-8")
        head.add("Content-Length", String(data.count))
        return ResponsePlan(head: head, body: .data(data), range: 0..<Int64(data.count))
    }
}

/// Decides the response to one request: route lookup, method check, the route's
/// configured faults (redirect, fixed status), validators, ranges and body framing.
/// Reads the route table through `ServerCore` (under its lock) and otherwise only opens
/// the route's file; runs on the connection thread.
struct ResponsePlanner {
    let core: ServerCore

    func plan(for request: RequestHead) -> ResponsePlan {
        guard let route = core.route(for: request.path) else { return .text(404) }
        guard request.method == "GET" || request.method == "HEAD" || (request.method == "POST" && route.options.answersPOST) else {
            var plan = ResponsePlan.text(405)
            plan.head.add("Allow", route.options.answersPOST ? "GET, HEAD, POST" : "GET, HEAD")
            return plan
        }
        var options = route.options
        switch options.faults?.draw() ?? .none {
        case .none: break
        case .unavailable(let seconds):
            options.status = 503
            options.retryAfter = seconds
        case .drop(let fraction):
            if let size = route.open()?.size { options.dropAfterBytes = Int64(Double(size) * fraction) }
        }
        if let destination = options.redirectTo {
            var plan = ResponsePlan.text(302)
            let absolute = destination.contains("://") ? destination : core.url(for: destination).absoluteString
            plan.head.add("Location", absolute)
            for field in options.extraHeaders { plan.head.add(field.name, field.value) }
            return plan
        }
        var plan: ResponsePlan
        if let status = options.status {
            plan = ResponsePlan.text(status)
            if let seconds = options.retryAfter { plan.head.add("Retry-After", String(seconds)) }
        } else if let change = options.versionChange {
            let representation = change.next(&options)
            plan = content(representation, options: options, request: request, honoursIfRange: false)
        } else {
            guard let representation = route.open() else { return .text(404) }
            plan = content(representation, options: options, request: request)
        }
        for field in options.extraHeaders { plan.head.add(field.name, field.value) }
        return plan
    }

    /// The body of every 416.
    static let unsatisfiablePage = Data("""
        <html>
        <head><title>416 Requested Range Not Satisfiable</title></head>
        <body><center><h1>416 Requested Range Not Satisfiable</h1></center></body>
        </html>

        """.utf8)

    /// 200, 206 or 416 for the route's content.
    /// `honoursIfRange` false: a server that ignores `If-Range` (`VersionChange`).
    private func content(_ representation: Representation, options: RouteOptions,
                         request: RequestHead, honoursIfRange: Bool = true) -> ResponsePlan {
        let size = representation.size
        // Range handling is defined for GET only (RFC 9110 §14.2); HEAD gets the 200 headers.
        let decision = options.acceptsRanges && request.method == "GET"
            ? RangeDecision.decide(range: request.headers["Range"], ifRange: honoursIfRange ? request.headers["If-Range"] : nil,
                                   size: size, etag: representation.etag,
                                   lastModified: representation.lastModified)
            : .whole

        var plan: ResponsePlan
        switch decision {
        case .unsatisfiable:
            // With a page, as nginx and Apache send one: its bytes are no part of the resource.
            plan = ResponsePlan(head: ResponseHead(status: 416), body: .data(Self.unsatisfiablePage),
                                range: 0..<Int64(Self.unsatisfiablePage.count))
            plan.head.add("Content-Range", "bytes */\(size)")
            plan.head.add("Content-Type", "text/html")
            plan.head.add("Content-Length", String(Self.unsatisfiablePage.count))
            if let etag = representation.etag { plan.head.add("ETag", etag) }
            return plan
        case .partial(let bytes):
            plan = ResponsePlan(head: ResponseHead(status: 206), body: representation.body,
                                range: bytes.lowerBound..<(bytes.upperBound + 1))
            plan.head.add("Content-Range", "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(size)")
        case .whole:
            plan = ResponsePlan(head: ResponseHead(status: 200), body: representation.body, range: 0..<size)
        }

        if let etag = representation.etag { plan.head.add("ETag", etag) }
        if let seconds = representation.lastModified { plan.head.add("Last-Modified", HTTPDate.format(seconds)) }
        if options.acceptsRanges { plan.head.add("Accept-Ranges", "bytes") }
        if let name = options.suggestedFilename { plan.head.add("Content-Disposition", Self.attachment(name)) }
        guard plan.body != nil else { return plan }

        plan.head.add("Content-Type", options.contentType)
        if !options.omitContentLength {
            plan.head.add("Content-Length", String(plan.range.count))
        } else if request.version.minor >= 1 {
            plan.framing = .chunked
            plan.head.add("Transfer-Encoding", "chunked")
        } else {
            plan.framing = .closeDelimited  // HTTP/1.0 has no chunked coding
            plan.closeConnection = true
        }
        plan.pacing = BodyPacing(bytesPerSecond: options.bytesPerSecond, dropAfterBytes: options.dropAfterBytes,
                                 stallAfterBytes: options.stallAfterBytes, trickleInterval: options.trickleInterval)
        return plan
    }

    /// `attachment; filename="…"`, plus an RFC 8187 `filename*` when the name is not plain ASCII.
    static func attachment(_ name: String) -> String {
        let plain = name.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 && $0.value != 0x7f }
        let fallback = String(name.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && scalar.value >= 0x20 && scalar.value != 0x7f ? Character(scalar) : "_"
        })
        let quoted = fallback.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        var value = "attachment; filename=\"\(quoted)\""
        if !plain {
            var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
            allowed.insert(charactersIn: "!#$&+-.^_`|~")
            value += "; filename*=UTF-8''" + (name.addingPercentEncoding(withAllowedCharacters: allowed) ?? fallback)
        }
        return value
    }
}
