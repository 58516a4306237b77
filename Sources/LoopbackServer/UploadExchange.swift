import Foundation
import Digests

/// Serves one request for the upload machinery: a plain upload, a resumable upload's
/// creation, offset query, append or cancellation, OPTIONS, or 405, with the route's faults
/// applied. Unlike `ResponsePlanner` it reads the body itself: 104 and 100 go out before the
/// body is read, and faults stop reading part-way. Records the request (after its body,
/// before the answer) and writes the answer.
///
/// Created per request on the connection's thread; shared state (upload routes, resumable
/// uploads, counters) is touched only through `ServerCore.state`, under the server lock.
struct UploadExchange {
    typealias Draft = ResumableUploadProtocol

    let connection: Connection
    let head: RequestHead
    let framing: RequestBodyFraming
    let target: UploadTarget

    var core: ServerCore { connection.core }

    /// How reading an upload body ended.
    enum BodyResult {
        case complete
        /// The drop fault fired: `dropAfterBytes` were read, the rest is left unread.
        case dropped
        /// The body runs past the upload's known length (`Upload-Length`).
        case overLength
        /// Not valid chunked coding (answered 400).
        case malformed
        /// The client went away, the socket failed or the server stopped.
        case failed
    }

    /// Serves the request; returns whether the connection stays open for another.
    func run() -> Bool {
        switch target {
        case .route(let path, let options, let alsoServed):
            serveRoute(path, options: options, alsoServed: alsoServed)
        case .resumePath(let path, let versions):
            serveResumePath(path, versions: versions)
        }
    }

    // MARK: Upload routes

    func serveRoute(_ path: String, options: UploadOptions, alsoServed: Bool) -> Bool {
        let versions = options.interopVersions
        let isUpload = head.method == "PUT" || head.method == "POST"
        let speaksDraft = !versions.isEmpty && head.headers.contains(Draft.Field.version)
        guard isUpload || (head.method == "OPTIONS" && speaksDraft) else {
            var plan = ResponsePlan.text(405)
            let methods = (alsoServed ? ["GET", "HEAD"] : []) + ["PUT", "POST"] + (versions.isEmpty ? [] : ["OPTIONS"])
            plan.head.add("Allow", methods.joined(separator: ", "))
            return answerEarly(plan)
        }
        if isUpload, options.status != nil {
            return failEveryUpload(options, route: path)
        }
        if speaksDraft {
            do {
                switch try Draft.identify(head, onResumePath: false, versions: versions) {
                case (.options, let version)?:
                    return answerEarly(ResponsePlan(head: Draft.options(version: version)))
                case (.creation(let complete, let uploadLength), let version)?:
                    return create(route: path, options: options, complete: complete,
                                  uploadLength: uploadLength, version: version)
                default:
                    break  // a PUT or POST without a completeness header is a plain upload
                }
            } catch {
                return answerEarly(ResponsePlan(head: Draft.failure(400, version: Draft.latestVersion)))
            }
        }
        return plainUpload(route: path, options: options)
    }

    func plainUpload(route path: String, options: UploadOptions) -> Bool {
        let file = Self.newFile(options.storage)
        let sink: UploadSink
        do {
            sink = try Self.sink(options.storage, file: file)
        } catch {
            return answerEarly(.text(500, "cannot store the upload: \(error)"))
        }
        guard sendContinueIfExpected() else { return false }
        let result = receive(into: sink, route: path, options: options, lengthBound: nil)
        guard case .complete = result else {
            if let file { try? FileManager.default.removeItem(at: file) }
            return ended(result, received: sink.received)
        }
        let digest = sink.finishHash()
        let upload = ReceivedUpload(method: head.method, path: path, byteCount: sink.received, sha256: digest,
                                    file: file, headers: head.headers, resumable: false, resumeURL: nil,
                                    requestCount: 1, completed: Date())
        core.state.withLock(notify: true) { $0.uploads.addReceived(upload) }
        connection.record(head, bodyLength: sink.received)
        let status = options.responseStatus ?? Self.defaultStatus(for: head.method)
        return connection.respond(Self.finalAnswer(status: status, bytes: sink.received, sha256: digest), to: head)
    }

    /// The `status` fault: reads the body (counted, throttled, maybe dropped) and throws it
    /// away, then answers `status`.
    func failEveryUpload(_ options: UploadOptions, route: String) -> Bool {
        guard let status = options.status, sendContinueIfExpected() else { return false }
        let sink = UploadSink()
        let result = receive(into: sink, route: route, options: options, lengthBound: nil)
        guard case .complete = result else { return ended(result, received: sink.received) }
        connection.record(head, bodyLength: sink.received)
        var plan = ResponsePlan.text(status)
        if let seconds = options.retryAfter { plan.head.add("Retry-After", String(seconds)) }
        return connection.respond(plan, to: head)
    }

    // MARK: Bodies

    /// Reads the body into `sink` under the route's faults, counting every byte in
    /// `uploadBytesReceived` as it arrives. Stops early (leaving the rest unread) when the
    /// drop fault fires or the body runs past `lengthBound` bytes.
    func receive(into sink: UploadSink, route: String, options: UploadOptions,
                         lengthBound: Int64?) -> BodyResult {
        let drop = core.state.withLock { $0.uploads.claimDrop(route: route, bodyLength: contentLength) }
        let stopAfter = [drop, lengthBound].compactMap { $0 }.min()
        let rate = options.bytesPerSecond.flatMap { $0 > 0 ? $0 : nil }
        let started = Date()
        let outcome: RequestBodyReader.Outcome?
        var malformed = false
        do {
            outcome = try RequestBodyReader.read(framing, from: connection.reader, stopAfter: stopAfter,
                                                 pieceLimit: rate.map { max(1, $0 / 20) } ?? .max) { piece in
                try sink.consume(piece)
                core.countUploadBytes(piece.count)
                if let rate {
                    let due = started.addingTimeInterval(Double(sink.received) / Double(rate))
                    guard core.pause(until: due) else { throw HTTPResponseWriter.Stopped() }
                }
            }
        } catch is RequestBodyReader.MalformedChunk {
            outcome = nil
            malformed = true
        } catch SocketReader.ReadError.tooLarge {
            outcome = nil  // an endless chunk line or trailer
            malformed = true
        } catch {
            outcome = nil
        }

        let result: BodyResult
        switch outcome {
        case .complete?: result = .complete
        case .stopped? where lengthBound == sink.received: result = .overLength
        case .stopped?: result = .dropped
        case nil: result = malformed ? .malformed : .failed
        }
        if drop != nil, options.dropOnce, !(result == .dropped) {
            // Claimed but never fired: the next request that gets that far gets it.
            core.state.withLock { $0.uploads.rearmDrop(route: route) }
        }
        return result
    }

    /// The request body's length when Content-Length gives it (0 without a body).
    var contentLength: Int64? {
        switch framing {
        case .none: 0
        case .length(let length): length
        case .chunked: nil
        }
    }

    /// Whether a Content-Length body would take the upload past its known total length.
    func bodyExceeds(_ upload: ResumableUpload) -> Bool {
        guard let total = upload.uploadLength, let length = contentLength else { return false }
        return upload.offset + length > total
    }

    func sendContinueIfExpected() -> Bool {
        guard head.expectsContinue, framing != .none else { return true }
        return (try? connection.writer.writeContinue()) != nil
    }

    // MARK: Answers

    /// Answers before reading the body (see `Connection.answerBeforeBody`).
    func answerEarly(_ plan: ResponsePlan) -> Bool {
        connection.answerBeforeBody(plan, to: head, framing: framing)
    }

    /// Another connection holds the upload and did not let go in time.
    func answerBusy() -> Bool {
        var plan = ResponsePlan.text(503, "the upload is still busy on another connection")
        plan.head.add("Retry-After", "1")
        return answerEarly(plan)
    }

    /// After a body that did not end normally: records the request and closes. A dropped
    /// one half-closes first so the client sees a FIN; a malformed one is answered 400.
    func ended(_ result: BodyResult, received: Int64) -> Bool {
        connection.record(head, bodyLength: received)
        switch result {
        case .dropped: connection.closeGracefully()
        case .malformed: _ = connection.refuse(400)
        default: break
        }
        return false
    }

    /// `{"bytes":N,"sha256":"hex"}` as JSON, so a client can check what arrived.
    static func finalAnswer(status: Int, bytes: Int64, sha256: String?) -> ResponsePlan {
        var head = ResponseHead(status: status)
        guard status != 204 && status != 304 else { return ResponsePlan(head: head) }
        var json = "{\"bytes\":\(bytes)"
        if let sha256 { json += ",\"sha256\":\"\(sha256)\"" }
        json += "}"
        let data = Data(json.utf8)
        head.add("Content-Type", "application/json")
        head.add("Content-Length", String(data.count))
        return ResponsePlan(head: head, body: .data(data), range: 0..<Int64(data.count))
    }

    static func defaultStatus(for method: String) -> Int {
        method == "PUT" ? 201 : 200
    }

    // MARK: Storage

    static func newFile(_ storage: UploadOptions.Storage) -> URL? {
        guard case .file(let directory) = storage else { return nil }
        return directory.appendingPathComponent("upload-\(UUID().uuidString).bin")
    }

    static func sink(_ storage: UploadOptions.Storage, file: URL?) throws(UploadSink.FileError) -> UploadSink {
        let hasher = storage == .countOnly ? nil : SHA256()
        guard let file else { return UploadSink(hasher: hasher) }
        return try UploadSink(hasher: hasher, file: file, offset: 0, create: true)
    }

    /// 128 random bits in hex: resume paths cannot be guessed or collide.
    static func newToken() -> String {
        (0..<2).map { _ in
            let hex = String(UInt64.random(in: .min ... .max), radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}
