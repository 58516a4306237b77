internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// One step of an upload in flight: a libcurl exchange streaming the body from the daemon's
/// link to the app's file, and keeping the server's answer in the task's response file.
/// Owned by the event loop.
///
/// Every new upload offers resumption as iOS 17 does (IETF draft "Resumable Uploads for
/// HTTP", S6.6): a server that answers `104` with a `Location` keeps what it received, so an
/// interrupted upload asks it how much it has (`HEAD`) and appends the rest (`PATCH`). A
/// server that does not answer `104` gets a plain upload, sent again from zero after a failure.
package final class UploadTransfer: Transfer {
    /// Which exchange of the resumable-upload protocol this is.
    package enum Step: Equatable {
        /// The app's request with the whole body, offering resumption.
        case create
        /// `HEAD` the upload resource for `Upload-Offset`.
        case retrieveOffset
        /// `PATCH` the rest of the body from this offset.
        case append(from: Int64)
    }

    /// What the engine does once this step's exchange ended.
    package enum Outcome {
        /// The server gave its final answer: the task is done (whatever the status, S2.5).
        case completed
        /// Go on at once with the next exchange.
        case next(Step)
        /// The server no longer knows the upload (or never did): send it again from zero.
        case restartFromZero(reason: String)
        /// The server asked to be asked again later (`RetryPolicy.serverWait`).
        case serverWait(RetryCause)
        /// A transport failure: retry with backoff, resuming if the server offered it.
        case transportFailure(CurlError)
    }

    package let session: SessionKey
    package private(set) var task: TaskRecord
    package let easy: CurlEasy
    package let step: Step
    /// Where the server's response body goes.
    package let responsePath: String
    /// 409s in a row so far in this chain of steps (a server that keeps disagreeing gets a
    /// fresh upload rather than an endless loop).
    package let conflicts: Int
    /// Decides when a server that keeps disagreeing about the offset gets a fresh upload.
    private let retryPolicy: RetryPolicy
    private var body: FileDescriptor?
    private let bodySize: Int64
    /// The body offset this exchange started sending from.
    private let startOffset: Int64
    private var response: FileDescriptor?
    private var responseBytes: Int64 = 0
    private var head = HTTPResponseHead()
    private var offeredResumption = false
    package private(set) var diskFailure: TransferFailure?
    package var lastProgressReport = Date.distantPast
    package var lastReportedBytes: Int64 = 0

    /// Called when the server offered resumption (`104`), so the location is durable before
    /// more bytes depend on it (the engine persists the task).
    package var onResumptionOffered: ((TaskRecord) -> Void)?

    /// The largest response body kept for `didReceive data`; the rest is dropped and logged.
    package static let responseBodyLimit: Int64 = 16 << 20
    /// The session's cookie store and what it does with it (S9.4).
    private let cookies: CookieJar?
    private let cookieSettings: CookieSettings?
    /// The container's root in the daemon: the body and the answer's file are opened through it.
    private let root: RootDirectory?
    package static let partialUploadContentType = "application/partial-upload"

    /// - Parameter bodyPath: the task's `uploadFile` as an absolute path (nil: it has none,
    ///   or one outside the container).
    package init(session: SessionKey, task: TaskRecord, step: Step, bodyPath: String?, responsePath: String, configuration: SessionConfiguration, credentials: TransferCredentials, conflicts: Int = 0, retryPolicy: RetryPolicy = RetryPolicy(), tls: TLSPolicy = .systemDefault, cookies: CookieJar? = nil, root: RootDirectory? = nil) throws {
        guard let path = bodyPath else {
            throw TransferFailure(code: TransferFailure.fileDoesNotExist, message: "upload task \(task.taskIdentifier) has no body file")
        }
        let resumption = task.uploadResumption
        if step != .create && resumption == nil {
            throw TransferFailure(code: TransferFailure.unknown, message: "upload task \(task.taskIdentifier) has no upload location to resume at")
        }
        self.session = session
        self.task = task
        self.step = step
        self.responsePath = responsePath
        self.conflicts = conflicts
        self.retryPolicy = retryPolicy
        self.cookies = cookies
        self.cookieSettings = configuration.cookies
        self.root = root
        self.easy = try CurlEasy()
        let body = try TransferFiles.open(path, O_RDONLY, root: root)
        self.body = body
        // Past this point a throw still closes the file: the instance is whole, so deinit runs.
        do { self.bodySize = try body.size() } catch {
            body.close()
            throw error
        }

        var extraHeaders: [String] = []
        switch step {
        case .create:
            startOffset = 0
            try easy.setURL(task.requestToSend.url)
            easy.setMethod(task.requestToSend.httpMethod)
            easy.setUploadSize(bodySize)
            let version = Self.requestedVersion(task.requestToSend)
            extraHeaders = ["Upload-Draft-Interop-Version: \(version)", Self.completeHeader(version: version)]
        case .retrieveOffset:
            startOffset = 0
            try easy.setURL(resumption!.location)
            easy.setMethod("HEAD")
            extraHeaders = ["Upload-Draft-Interop-Version: \(resumption!.interopVersion)"]
        case .append(let offset):
            let resumption = resumption!
            startOffset = min(max(0, offset), bodySize)
            try easy.setURL(resumption.location)
            easy.setMethod("PATCH")
            easy.setUploadSize(bodySize - startOffset)
            extraHeaders = ["Upload-Draft-Interop-Version: \(resumption.interopVersion)", "Upload-Offset: \(startOffset)",
                            Self.completeHeader(version: resumption.interopVersion)]
            if resumption.interopVersion >= 6 { extraHeaders.append("Content-Type: \(Self.partialUploadContentType)") }
        }
        // The app's Content-Type describes the whole body: it goes with the creation only.
        try easy.apply(task.requestToSend, in: configuration, credentials: credentials, tls: tls,
                       excluding: step == .create ? Self.protocolHeaders : Self.protocolHeaders.union(["content-type"]),
                       extraHeaders: extraHeaders + CookieJar.requestFields(cookies, configuration.cookies, for: task.requestToSend, on: easy))
        easy.setBufferSize(2 << 20)
        _ = try body.seek(to: startOffset)
        self.task.countOfBytesSent = startOffset
        self.task.countOfBytesExpectedToSend = bodySize

        easy.onHeaderLine = { [unowned self] line in self.headerLine(line) }
        easy.onBody = { [unowned self] bytes in self.receive(bytes) }
        if step != .retrieveOffset {
            easy.onUploadRead = { [unowned self] buffer in self.read(into: buffer) }
            easy.onUploadSeek = { [unowned self] offset in self.rewind(to: offset) }
        }
    }

    /// The interop version to offer: the app's own `Upload-Draft-Interop-Version` if it set
    /// one we speak, else the latest.
    package static func requestedVersion(_ request: RequestRecord) -> Int {
        let asked = request.headers.last { $0.name.isSameHTTPFieldName(as: "Upload-Draft-Interop-Version") }.flatMap { Int($0.value.trimmingCharacters(in: .whitespaces)) }
        return asked.flatMap { UploadResumption.supportedVersions.contains($0) ? $0 : nil } ?? UploadResumption.defaultVersion
    }

    /// "This request carries the rest of the body": `Upload-Complete: ?1` from version 5 on,
    /// `Upload-Incomplete: ?0` in version 3.
    private static func completeHeader(version: Int) -> String {
        version >= 5 ? "Upload-Complete: ?1" : "Upload-Incomplete: ?0"
    }

    /// Request headers (lowercased) this transfer sets itself on every step.
    private static let protocolHeaders: Set<String> = ["upload-draft-interop-version", "upload-complete", "upload-incomplete", "upload-offset",
                                                       "content-length", "expect", "transfer-encoding"]

    // MARK: libcurl callbacks

    private func headerLine(_ line: String) {
        head.consume(line)
        CookieJar.keepRedirect(cookies, cookieSettings, head, after: line, from: easy.effectiveURL)
        guard head.isComplete, head.statusCode == 104, step == .create, !offeredResumption else { return }
        offeredResumption = true
        let version = head.value("Upload-Draft-Interop-Version").flatMap { Int($0) } ?? Self.requestedVersion(task.requestToSend)
        guard let location = head.value("Location"), UploadResumption.supportedVersions.contains(version),
              let base = URL(string: easy.effectiveURL ?? task.requestToSend.url),
              let absolute = URL(string: location, relativeTo: base)?.absoluteURL,
              let scheme = absolute.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return }
        task.uploadResumption = UploadResumption(location: absolute.absoluteString, interopVersion: version)
        onResumptionOffered?(task)
    }

    private func read(into buffer: UnsafeMutableRawBufferPointer) -> CurlEasy.UploadDisposition {
        guard let body else { return .abort }
        do {
            let count = try body.read(into: buffer)
            task.countOfBytesSent += Int64(count)
            return .bytes(count)
        } catch {
            diskFailure = TransferFailure(code: TransferFailure.noPermissionsToReadFile, message: "cannot read the upload body \(task.uploadFile ?? ""): \(error)", subject: task.uploadFile)
            return .abort
        }
    }

    /// libcurl sends the body again (a redirect, a dead reused connection): `offset` counts
    /// from this exchange's start.
    private func rewind(to offset: Int64) -> Bool {
        guard let position = try? body?.seek(to: startOffset + offset) else { return false }
        task.countOfBytesSent = position
        return true
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) -> CurlEasy.BodyDisposition {
        if response == nil {
            do {
                response = try TransferFiles.open(responsePath, O_WRONLY | O_CREAT | O_TRUNC, root: root)
            } catch {
                diskFailure = TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot keep the server's answer in \(responsePath): \(error)", subject: responsePath)
                return .abort
            }
        }
        let room = max(0, Self.responseBodyLimit - responseBytes)
        let kept = UnsafeRawBufferPointer(rebasing: bytes.prefix(Int(min(room, Int64(bytes.count)))))
        do { try response?.writeAll(kept) } catch {
            diskFailure = TransferFailure(code: TransferFailure.cannotWriteToFile, message: "cannot keep the server's answer in \(responsePath): \(error)", subject: responsePath)
            return .abort
        }
        responseBytes += Int64(bytes.count)
        return .consumed
    }

    // MARK: The end of the exchange

    /// Bytes of the server's answer beyond what was kept.
    package var responseBytesDropped: Int64 { max(0, responseBytes - Self.responseBodyLimit) }

    /// Decides what comes next, from libcurl's result and the final response (`now` reads a
    /// `Retry-After` date). Records the response in the task when it is the final one.
    package func finish(_ result: Result<Void, CurlError>, now: Date) -> Outcome {
        close()
        if case .failure(let error) = result { return .transportFailure(error) }
        if let wait = head.serverWait(now: now) { return .serverWait(wait) }
        let status = head.statusCode
        switch step {
        case .retrieveOffset:
            if status == 404 || status == 410 { return .restartFromZero(reason: "the server no longer has the upload (HTTP \(status))") }
            guard (200..<300).contains(status), let offset = head.value("Upload-Offset").flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }) else {
                return .restartFromZero(reason: "the server answered the offset request with HTTP \(status) and no Upload-Offset")
            }
            guard offset >= 0 && offset <= bodySize else { return .restartFromZero(reason: "the server holds \(offset) bytes of a \(bodySize)-byte body") }
            if serverSaysComplete {
                // Complete with fewer bytes than the body: not this body, whatever it holds.
                guard offset == bodySize else { return .restartFromZero(reason: "the server calls the upload complete at \(offset) bytes of a \(bodySize)-byte body") }
                // It has everything; only its final answer was lost with the connection.
                recordResponse()
                task.countOfBytesSent = bodySize
                return .completed
            }
            task.countOfBytesSent = offset
            return .next(.append(from: offset))
        case .append:
            if status == 409 {
                return retryPolicy.restartsUpload(afterOffsetConflicts: conflicts + 1) ? .restartFromZero(reason: "the server disagreed about the offset \(conflicts + 1) times") : .next(.retrieveOffset)
            }
            if status == 404 || status == 410 { return .restartFromZero(reason: "the server no longer has the upload (HTTP \(status))") }
        case .create: break
        }
        recordResponse()
        return .completed
    }

    private var serverSaysComplete: Bool {
        if let complete = head.value("Upload-Complete") { return complete.trimmingCharacters(in: .whitespaces) == "?1" }
        if let incomplete = head.value("Upload-Incomplete") { return incomplete.trimmingCharacters(in: .whitespaces) == "?0" }
        return false
    }

    private func recordResponse() {
        task.response = ResponseRecord(url: easy.effectiveURL ?? task.requestToSend.url, statusCode: head.statusCode, headers: head.headerDictionary)
        CookieJar.keep(cookies, cookieSettings, head, from: easy.effectiveURL ?? task.requestToSend.url)
        task.networkProtocolName = easy.networkProtocolName
        task.redirectCount = easy.redirectCount
        task.currentURL = easy.effectiveURL
        task.countOfBytesReceived = min(responseBytes, Self.responseBodyLimit)
        task.countOfBytesExpectedToReceive = head.contentLength ?? responseBytes
    }

    /// The server's answer as delivered to `didReceive data`; nil when it sent no body.
    package func responseBody() -> Data? {
        guard responseBytes > 0, let fd = try? TransferFiles.open(responsePath, O_RDONLY, root: root) else { return nil }
        defer { fd.close() }
        return try? fd.readToEnd(limit: Int(Self.responseBodyLimit))
    }

    /// Stops sending (cancel, suspend, shutdown).
    package func close() {
        response?.close()
        response = nil
        body?.close()
        body = nil
    }

    deinit { close() }

    package var bytesMoved: Int64 { task.countOfBytesSent }

    package var progress: TaskProgress {
        TaskProgress(taskIdentifier: task.taskIdentifier, bytesSent: task.countOfBytesSent - lastReportedBytes, totalBytesSent: task.countOfBytesSent,
                     totalBytesExpectedToSend: bodySize, state: .running, currentURL: task.currentURL)
    }
}
