import Foundation

/// The resumable-upload half of `UploadExchange` (draft-ietf-httpbis-resumable-upload):
/// creation, offset queries, appends and cancellation of an upload resource.
extension UploadExchange {
    // MARK: Resumable uploads

    /// Upload creation: registers the upload, announces its resume URL with 104, then reads
    /// the body like an append.
    func create(route path: String, options: UploadOptions, complete: Bool,
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

    func serveResumePath(_ path: String, versions: Set<Int>) -> Bool {
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
            // `identify` names creations on upload routes only; should one come here, it is
            // answered as a request the protocol does not allow, not trapped on.
            return answerEarly(ResponsePlan(head: Draft.failure(400, version: version)))
        }
    }

    func append(_ path: String, offset: Int64, complete: Bool, uploadLength: Int64?, version: Int) -> Bool {
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
    func finish(_ resumePath: String, sink: UploadSink, result: BodyResult, requestComplete: Bool,
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
    func detach(_ resumePath: String, sink: UploadSink, completes: Bool) -> ResumableUpload? {
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
}
