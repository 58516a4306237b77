import Foundation
import TransferContainer

/// Serves one request for the upload machinery: a plain upload, a resumable upload's
/// creation, offset query, append or cancellation, OPTIONS, or 405, with the route's faults
/// applied. Unlike `RequestHandler` it reads the body itself: 104 and 100 go out before the
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

    private var core: ServerCore { connection.core }

    /// How reading an upload body ended.
    private enum BodyResult {
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

    private func serveRoute(_ path: String, options: UploadOptions, alsoServed: Bool) -> Bool {
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

    private func plainUpload(route path: String, options: UploadOptions) -> Bool {
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
    private func failEveryUpload(_ options: UploadOptions, route: String) -> Bool {
        guard let status = options.status, sendContinueIfExpected() else { return false }
        let sink = UploadSink()
        let result = receive(into: sink, route: route, options: options, lengthBound: nil)
        guard case .complete = result else { return ended(result, received: sink.received) }
        connection.record(head, bodyLength: sink.received)
        var plan = ResponsePlan.text(status)
        if let seconds = options.retryAfter { plan.head.add("Retry-After", String(seconds)) }
        return connection.respond(plan, to: head)
    }

    // MARK: Resumable uploads

    /// Upload creation: registers the upload, announces its resume URL with 104, then reads
    /// the body like an append.
    private func create(route path: String, options: UploadOptions, complete: Bool,
                        uploadLength: Int64?, version: Int) -> Bool {
        let resumePath = Draft.resumePathPrefix + Self.newToken()
        let location = core.baseURL.absoluteString + resumePath
        let file = Self.newFile(options.storage)
        var upload = ResumableUpload(resumePath: resumePath, location: location, routePath: path,
                                     method: head.method, headers: head.headers,
                                     versions: options.interopVersions,
                                     finalStatus: options.responseStatus ?? Self.defaultStatus(for: head.method),
                                     file: file)
        guard upload.agreeOnLength(complete: complete, contentLength: contentLength, uploadLength: uploadLength),
              !bodyExceeds(upload) else {
            return answerEarly(ResponsePlan(head: Draft.conflict(offset: 0, complete: false, version: version)))
        }
        let sink: UploadSink
        do {
            sink = try Self.sink(options.storage, file: file)
        } catch {
            return answerEarly(.text(500, "cannot store the upload: \(error)"))
        }
        upload.attachedConnection = connection.id
        upload.requestCount = 1
        core.state.withLock { $0.uploads.resumable[resumePath] = upload }

        // The resume URL goes out before any body byte is read, so a client cut off
        // mid-body knows where to resume. HTTP/1.0 clients must not get 1xx answers.
        do {
            if head.version.minor >= 1 {
                try connection.writer.writeHead(Draft.resumptionSupported(location: location, version: version),
                                                bodyFollows: false)
            }
        } catch {
            detach(resumePath, sink: sink, completes: false)
            return false
        }
        guard sendContinueIfExpected() else {
            detach(resumePath, sink: sink, completes: false)
            return false
        }
        let result = receive(into: sink, route: path, options: options, lengthBound: upload.uploadLength)
        return finish(resumePath, sink: sink, result: result, requestComplete: complete,
                      version: version, location: location)
    }

    private func serveResumePath(_ path: String, versions: Set<Int>) -> Bool {
        let request: Draft.Request
        let version: Int
        do {
            guard let identified = try Draft.identify(head, onResumePath: true, versions: versions) else {
                return answerEarly(.text(404))
            }
            (request, version) = identified
        } catch {
            return answerEarly(ResponsePlan(head: Draft.failure(400, version: Draft.latestVersion)))
        }

        switch request {
        case .options:
            return answerEarly(ResponsePlan(head: Draft.options(version: version)))
        case .offsetRetrieval:
            guard core.takeOver(path, by: connection.id) else { return answerBusy() }
            guard let upload = core.state.withLock({ $0.uploads.resumable[path] }) else {
                return answerEarly(ResponsePlan(head: Draft.failure(404, version: version)))
            }
            return answerEarly(ResponsePlan(head: Draft.offsetRetrieved(offset: upload.offset, complete: upload.complete,
                                                                         version: version)))
        case .cancellation:
            guard core.takeOver(path, by: connection.id) else { return answerBusy() }
            guard let upload = core.state.withLock(notify: true, { $0.uploads.resumable.removeValue(forKey: path) }) else {
                return answerEarly(ResponsePlan(head: Draft.failure(404, version: version)))
            }
            if !upload.complete, let file = upload.file { try? FileManager.default.removeItem(at: file) }
            return answerEarly(ResponsePlan(head: Draft.cancelled(version: version)))
        case .append(let offset, let complete, let uploadLength):
            return append(path, offset: offset, complete: complete, uploadLength: uploadLength, version: version)
        case .creation:
            preconditionFailure("creations are only identified on upload routes")
        }
    }

    private func append(_ path: String, offset: Int64, complete: Bool, uploadLength: Int64?, version: Int) -> Bool {
        enum Decision {
            case notFound
            case conflict(offset: Int64, complete: Bool)
            case failing(UploadOptions, route: String)
            case attached(ResumableUpload, UploadOptions)
        }
        guard core.takeOver(path, by: connection.id) else { return answerBusy() }
        let decision = core.state.withLock { state -> Decision in
            guard var upload = state.uploads.resumable[path] else { return .notFound }
            // A removed route's uploads can still finish, without faults.
            let options = state.uploads.routes[upload.routePath]?.options ?? UploadOptions()
            if options.status != nil { return .failing(options, route: upload.routePath) }
            let conflict = Decision.conflict(offset: upload.offset, complete: upload.complete)
            guard upload.attachedConnection == nil, !upload.complete, upload.offset == offset else { return conflict }
            if state.uploads.claimConflict(route: upload.routePath) { return conflict }
            guard upload.agreeOnLength(complete: complete, contentLength: contentLength, uploadLength: uploadLength),
                  !bodyExceeds(upload) else { return conflict }
            upload.attachedConnection = connection.id
            upload.requestCount += 1
            let taken = upload
            upload.hasher = nil  // travels with the connection until it detaches
            state.uploads.resumable[path] = upload
            return .attached(taken, options)
        }

        switch decision {
        case .notFound:
            return answerEarly(ResponsePlan(head: Draft.failure(404, version: version)))
        case .conflict(let current, let done):
            return answerEarly(ResponsePlan(head: Draft.conflict(offset: current, complete: done, version: version)))
        case .failing(let options, let route):
            return failEveryUpload(options, route: route)
        case .attached(let upload, let options):
            let sink: UploadSink
            do {
                sink = try upload.file.map { file throws(UploadSink.FileError) in
                    try UploadSink(hasher: upload.hasher, file: file, offset: upload.offset, create: false)
                } ?? UploadSink(hasher: upload.hasher)
            } catch {
                core.state.withLock(notify: true) { state in
                    state.uploads.resumable[path]?.hasher = upload.hasher
                    state.uploads.resumable[path]?.attachedConnection = nil
                }
                return answerEarly(.text(500, "cannot store the upload: \(error)"))
            }
            guard sendContinueIfExpected() else {
                detach(path, sink: sink, completes: false)
                return false
            }
            let bound = upload.uploadLength.map { $0 - upload.offset }
            let result = receive(into: sink, route: upload.routePath, options: options, lengthBound: bound)
            return finish(path, sink: sink, result: result, requestComplete: complete, version: version, location: nil)
        }
    }

    /// After a creation's or append's body: writes back what it brought, then answers.
    /// `location` is sent for creations only.
    private func finish(_ resumePath: String, sink: UploadSink, result: BodyResult, requestComplete: Bool,
                        version: Int, location: String?) -> Bool {
        let completes: Bool
        if case .complete = result { completes = requestComplete } else { completes = false }
        let upload = detach(resumePath, sink: sink, completes: completes)
        switch result {
        case .complete:
            break
        case .overLength:
            connection.record(head, bodyLength: sink.received)
            var plan = ResponsePlan(head: Draft.conflict(offset: upload?.offset ?? 0, complete: false, version: version))
            plan.closeConnection = true
            _ = connection.respond(plan, to: head)
            connection.closeGracefully()
            return false
        case .dropped, .malformed, .failed:
            return ended(result, received: sink.received)
        }
        connection.record(head, bodyLength: sink.received)
        guard let upload else {
            // Cancelled while this body was being read.
            return connection.respond(ResponsePlan(head: Draft.failure(404, version: version)), to: head)
        }
        guard completes else {
            return connection.respond(ResponsePlan(head: Draft.incomplete(offset: upload.offset, location: location,
                                                                           version: version)), to: head)
        }
        var plan = Self.finalAnswer(status: upload.finalStatus, bytes: upload.offset, sha256: upload.sha256)
        Draft.addState(to: &plan.head, offset: upload.offset, complete: true, version: version)
        if let location { plan.head.add("Location", location) }
        return connection.respond(plan, to: head)
    }

    /// Hands a resumable upload back: adds what this request received to its offset and
    /// returns the hash; when `completes`, finishes it and adds it to the received uploads.
    /// Returns the upload as it now stands (nil if it was cancelled meanwhile).
    @discardableResult
    private func detach(_ resumePath: String, sink: UploadSink, completes: Bool) -> ResumableUpload? {
        let digest = completes ? sink.finishHash() : nil
        let hasher = sink.hasher
        let id = connection.id
        return core.state.withLock(notify: true) { state -> ResumableUpload? in
            guard var upload = state.uploads.resumable[resumePath], upload.attachedConnection == id else { return nil }
            upload.attachedConnection = nil
            upload.offset += sink.received
            upload.hasher = hasher
            if completes {
                upload.complete = true
                upload.sha256 = digest
                state.uploads.addReceived(ReceivedUpload(
                    method: upload.method, path: upload.routePath, byteCount: upload.offset, sha256: digest,
                    file: upload.file, headers: upload.headers, resumable: true,
                    resumeURL: URL(string: upload.location), requestCount: upload.requestCount, completed: Date()))
            }
            state.uploads.resumable[resumePath] = upload
            return upload
        }
    }

    // MARK: Bodies

    /// Reads the body into `sink` under the route's faults, counting every byte in
    /// `uploadBytesReceived` as it arrives. Stops early (leaving the rest unread) when the
    /// drop fault fires or the body runs past `lengthBound` bytes.
    private func receive(into sink: UploadSink, route: String, options: UploadOptions,
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
    private var contentLength: Int64? {
        switch framing {
        case .none: 0
        case .length(let length): length
        case .chunked: nil
        }
    }

    /// Whether a Content-Length body would take the upload past its known total length.
    private func bodyExceeds(_ upload: ResumableUpload) -> Bool {
        guard let total = upload.uploadLength, let length = contentLength else { return false }
        return upload.offset + length > total
    }

    private func sendContinueIfExpected() -> Bool {
        guard head.expectsContinue, framing != .none else { return true }
        return (try? connection.writer.writeContinue()) != nil
    }

    // MARK: Answers

    /// Answers before reading the body (see `Connection.answerBeforeBody`).
    private func answerEarly(_ plan: ResponsePlan) -> Bool {
        connection.answerBeforeBody(plan, to: head, framing: framing)
    }

    /// Another connection holds the upload and did not let go in time.
    private func answerBusy() -> Bool {
        var plan = ResponsePlan.text(503, "the upload is still busy on another connection")
        plan.head.add("Retry-After", "1")
        return answerEarly(plan)
    }

    /// After a body that did not end normally: records the request and closes. A dropped
    /// one half-closes first so the client sees a FIN; a malformed one is answered 400.
    private func ended(_ result: BodyResult, received: Int64) -> Bool {
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

    private static func newFile(_ storage: UploadOptions.Storage) -> URL? {
        guard case .file(let directory) = storage else { return nil }
        return directory.appendingPathComponent("upload-\(UUID().uuidString).bin")
    }

    private static func sink(_ storage: UploadOptions.Storage, file: URL?) throws(UploadSink.FileError) -> UploadSink {
        let hasher = storage == .countOnly ? nil : SHA256()
        guard let file else { return UploadSink(hasher: hasher) }
        return try UploadSink(hasher: hasher, file: file, offset: 0, create: true)
    }

    /// 128 random bits in hex: resume paths cannot be guessed or collide.
    private static func newToken() -> String {
        (0..<2).map { _ in
            let hex = String(UInt64.random(in: .min ... .max), radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}
