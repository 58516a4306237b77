internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// One download in flight: a libcurl exchange streaming the body straight into the task's
/// partial file, resuming with `Range` + `If-Range` when bytes are already on disk.
/// Owned by the event loop.
///
/// Resume rules (issue "crash-proof"): the offset is the partial file's size; a `206` whose
/// range starts there and whose validator strongly matches the `If-Range` sent is appended
/// (`ResumeValidation`); any other `206` restarts from zero, and so does a `200` (range
/// ignored, or validator changed) — never a mixed file; a resource without a validator
/// restarts from zero.
package final class DownloadTransfer: Transfer {
    package let session: SessionKey
    package private(set) var task: TaskRecord
    package let easy: CurlEasy
    package let partialPath: String
    private var file: FileDescriptor?
    /// Where an error status's body goes (never into the partial file: a 503 to a resumed
    /// request must not cost the bytes already on disk).
    package var errorBodyPath: String { Self.errorBodyPath(partialPath: partialPath) }
    package static func errorBodyPath(partialPath: String) -> String { partialPath + ".response" }
    /// Whether this attempt's body went to `errorBodyPath`.
    package private(set) var bodyIsErrorResponse = false
    /// Whether this attempt's body is dropped: the page of a 416 that says the file on disk is whole.
    private var discardsBody = false
    /// Bytes on disk when this attempt began (the `Range` offset sent).
    private let resumeOffset: Int64
    /// The task's response and expected length as this attempt began: what an error page
    /// that is not the task's answer must not replace in its record (`taskWithoutErrorPage`).
    private let responseAtStart: ResponseRecord?
    private let expectedAtStart: Int64
    /// The validator the bytes on disk were fetched under, sent as `If-Range` (nil when no
    /// range was asked for). Kept apart: `finishHead` replaces `task.validator` with the answer's.
    private let sentValidator: Validator?
    private var head = HTTPResponseHead()
    private var bodyStarted = false
    private var bytesSinceCheckpoint: Int64 = 0
    /// Set when the body cannot be written; the completion reports it instead of libcurl's abort.
    package private(set) var diskFailure: TransferFailure?
    /// Set when the server's answer cannot be used at all (a `206` to a request without `Range`).
    package private(set) var protocolFailure: TransferFailure?
    /// Set when the proxy refused the `CONNECT` tunnel with `407`: the task's response is that
    /// answer (with its `Proxy-Authenticate`), for the engine to ask the app (S3.1).
    package private(set) var tunnelNeedsProxyCredentials = false
    /// Set when the server answered a range with something unusable; the engine starts over from zero.
    package private(set) var mustRestartFromZero = false
    /// When the transfer last pushed progress; owned by the engine.
    package var lastProgressReport = Date.distantPast
    /// Starts at the bytes already on disk: a resumed download's first `didWriteData` counts
    /// only what this attempt wrote.
    package var lastReportedBytes: Int64 = 0
    /// Bytes the container's file system keeps free: the download stops (-3003, resumable)
    /// rather than take them (`transferd --free-space-reserve`).
    private let freeSpaceReserve: Int64
    /// Bytes written since free space was last looked at; it is looked at every
    /// `spaceCheckInterval` bytes, and before the first.
    private var bytesSinceSpaceCheck: Int64 = .max
    package static let spaceCheckInterval: Int64 = 1 << 20

    /// Called when the response head is known, before any body byte is written, so the
    /// validator is durable before bytes that depend on it (the engine persists the task).
    package var onResponse: ((TaskRecord) -> Void)?
    /// Called once, for a task made from resume data, with the offset the body continues at
    /// (0 when the server sent the whole body again).
    package var onResumed: ((TaskRecord, Int64) -> Void)?
    /// Called every `checkpointInterval` bytes with the task's current counts.
    package var onCheckpoint: ((TaskRecord) -> Void)?
    package static let checkpointInterval: Int64 = 16 << 20
    /// Writes the body into `file`, gathering libcurl's pieces (`BodyFileWriter`); made at the
    /// body's first byte, when its length is known.
    private var writer: BodyFileWriter?
    /// A body whose rest is at least this long has its disk blocks allocated before its first
    /// write (`FileDescriptor.reserveBlocks`): a download that began keeps its space when
    /// another program fills the disk, and ext4 fills blocks it has instead of reserving and
    /// allocating them as the writes come (a third less of the daemon's CPU for the writes,
    /// though most of that moves to ext4's own workers: Benchmarks/README.md). Below it the
    /// call costs more than it saves.
    package static let reservationThreshold: Int64 = 1 << 20
    /// Where the blocks reserved for the body end (0: none reserved). The file's size is not
    /// changed by the reservation, so the bytes on disk are still what it says; blocks past the
    /// last byte are given back when the transfer ends, however it ends (a partial file kept
    /// for a resume holds only its bytes; the resumed transfer reserves again).
    private var reservedEnd: Int64 = 0
    private var reservationTried = false

    /// `file`, when given, is the file at `partialPath`, open for writing (the daemon opens it
    /// relative to its cache folder); otherwise the file there is opened, or created, never
    /// through a symlink.
    /// The session's cookie store and what it does with it (S9.4).
    private let cookies: CookieJar?
    private let cookieSettings: CookieSettings?
    /// The container's root in the daemon: the error page's file is opened through it.
    private let root: RootDirectory?

    /// `requestBody`: the request's body (a POST that answers with a file), sent with each attempt.
    package init(session: SessionKey, task: TaskRecord, partialPath: String, file: FileDescriptor? = nil, root: RootDirectory? = nil, configuration: SessionConfiguration,
         credentials: TransferCredentials, freeSpaceReserve: Int64 = 0, tls: TLSPolicy = .systemDefault, cookies: CookieJar? = nil, requestBody: Data? = nil) throws {
        self.session = session
        self.cookies = cookies
        self.cookieSettings = configuration.cookies
        self.freeSpaceReserve = max(0, freeSpaceReserve)
        self.task = task
        self.partialPath = partialPath
        self.root = root
        let (fd, onDisk) = try Self.preparePartialFile(file ?? TransferFiles.open(partialPath, O_WRONLY | O_CREAT, root: root), canResume: task.validator?.ifRangeValue != nil)
        self.file = fd
        self.resumeOffset = onDisk
        self.responseAtStart = task.response
        self.expectedAtStart = task.countOfBytesExpectedToReceive
        self.sentValidator = onDisk > 0 ? task.validator : nil
        self.task.countOfBytesReceived = onDisk
        self.lastReportedBytes = onDisk
        do {
            self.easy = try CurlEasy()
            try easy.setURL(task.requestToSend.url)
            easy.setMethod(task.requestToSend.httpMethod)
            if let requestBody { easy.setBody(requestBody) }
            var resumeHeaders: [String] = []
            if onDisk > 0, let ifRange = task.validator?.ifRangeValue {
                easy.setRange(from: onDisk)
                resumeHeaders.append("If-Range: \(ifRange)")
            }
            try easy.apply(task.requestToSend, in: configuration, credentials: credentials, tls: tls,
                           extraHeaders: resumeHeaders + CookieJar.requestFields(cookies, configuration.cookies, for: task.requestToSend, on: easy))
        } catch {
            fd.close()
            throw error
        }
        easy.setBufferSize(512 * 1024)

        easy.onHeaderLine = { [unowned self] line in
            self.head.consume(line)
            CookieJar.keepRedirect(self.cookies, self.cookieSettings, self.head, after: line, from: self.easy.effectiveURL)
        }
        easy.onBody = { [unowned self] bytes in self.receive(bytes) }
    }

    /// The partial file's bytes on disk, where the body goes on (`BodyFileWriter` writes at
    /// offsets); with nothing to resume against (no validator), empties it first.
    private static func preparePartialFile(_ fd: FileDescriptor, canResume: Bool) throws -> (FileDescriptor, Int64) {
        do {
            var onDisk = try fd.size()
            if onDisk > 0 && !canResume {
                try fd.truncate(to: 0)
                onDisk = 0
            }
            return (fd, onDisk)
        } catch {
            fd.close()
            throw error
        }
    }

    /// Bytes of the whole resource on disk now.
    package var bytesOnDisk: Int64 { task.countOfBytesReceived }

    private func receive(_ bytes: UnsafeRawBufferPointer) -> CurlEasy.BodyDisposition {
        if !bodyStarted {
            bodyStarted = true
            guard beginBody() else { return .abort }
        }
        if discardsBody { return .consumed }
        guard let file else { return .abort }
        // Bytes going into reserved blocks take no new space: only those past them are checked.
        if bytesSinceSpaceCheck >= Self.spaceCheckInterval && task.countOfBytesReceived + Int64(bytes.count) > reservedEnd {
            bytesSinceSpaceCheck = 0
            guard leavesReserve(writing: Int64(bytes.count), to: file) else { return .abort }
        }
        bytesSinceSpaceCheck += Int64(bytes.count)
        if !reservationTried { reserveRestOfBody(in: file) }
        do {
            try bodyWriter(for: file).append(bytes)
        } catch {
            diskFailure = TransferFailure(code: TransferFailure.cannotWriteToFile, message: "cannot write the download to \(partialPath): \(error)", subject: partialPath)
            return .abort
        }
        task.update { $0.countOfBytesReceived += Int64(bytes.count) }
        bytesSinceCheckpoint += Int64(bytes.count)
        if bytesSinceCheckpoint >= Self.checkpointInterval {
            bytesSinceCheckpoint = 0
            do {
                try writer?.flush()
            } catch {
                diskFailure = TransferFailure(code: TransferFailure.cannotWriteToFile, message: "cannot write the download to \(partialPath): \(error)", subject: partialPath)
                return .abort
            }
            onCheckpoint?(task)
        }
        return .consumed
    }

    /// The writer of this attempt's body, made at its first byte: the offset and the rest of
    /// the body are known then (an error page's file is never written direct).
    private func bodyWriter(for file: FileDescriptor) -> BodyFileWriter {
        if let writer { return writer }
        let expected = task.countOfBytesExpectedToReceive
        let received = task.countOfBytesReceived
        let made = BodyFileWriter(file: file, at: received, restOfBody: expected > received ? expected - received : nil, allowDirect: !bodyIsErrorResponse)
        writer = made
        return made
    }

    /// Allocates the blocks for the rest of a long partial download, once, after the free-space
    /// check (which counts the rest of the body as needed). A file system that cannot, or has no
    /// room, leaves the writes to allocate as before: they report the real error.
    private func reserveRestOfBody(in file: FileDescriptor) {
        reservationTried = true
        let expected = task.countOfBytesExpectedToReceive
        let start = task.countOfBytesReceived
        guard !bodyIsErrorResponse, expected - start >= Self.reservationThreshold else { return }
        do {
            try file.reserveBlocks(from: start, length: expected - start)
            reservedEnd = expected
        } catch {}
    }

    /// Gives back the reserved blocks past the last byte written (a transfer stopped part-way,
    /// a body shorter than its length said, or one that libcurl decoded to fewer bytes): a
    /// truncate to the bytes counted, which the file holds.
    private func releaseUnusedReservation(of file: FileDescriptor) {
        guard reservedEnd > task.countOfBytesReceived else { return }
        reservedEnd = 0
        try? file.truncate(to: task.countOfBytesReceived)
    }

    /// Writes what is pending before the file is handed on or closed; when that fails, the
    /// count goes back to the bytes in the file, and `diskFailure` says why. Ends the writer.
    private func flushBeforeClosing() -> Bool {
        guard let writer else { return true }
        defer {
            writer.close()
            self.writer = nil
        }
        do {
            try writer.flush()
            return true
        } catch {
            task.countOfBytesReceived = writer.bytesInFile
            if diskFailure == nil {
                diskFailure = TransferFailure(code: TransferFailure.cannotWriteToFile, message: "cannot write the download to \(partialPath): \(error)", subject: partialPath)
            }
            return false
        }
    }

    /// Whether writing `count` more bytes (and, when the length is known, the rest of the
    /// body) leaves the reserve free; if not, the download stops with -3003 and its bytes stay
    /// for resume data.
    private func leavesReserve(writing count: Int64, to file: FileDescriptor) -> Bool {
        guard freeSpaceReserve > 0, let available = try? file.availableSpace() else { return true }
        let expected = task.countOfBytesExpectedToReceive
        let needed = max(count, expected > task.countOfBytesReceived ? expected - task.countOfBytesReceived : 0)
        guard available - needed < freeSpaceReserve else { return true }
        diskFailure = TransferFailure(code: TransferFailure.cannotWriteToFile,
                                      message: "not enough space: \(available) bytes free on the container's file system, \(needed) more needed, \(freeSpaceReserve) kept in reserve",
                                      subject: partialPath)
        return false
    }

    /// Decides, from the final response head, whether the body continues the bytes on disk.
    private func beginBody() -> Bool {
        if resumeOffset > 0 && head.statusCode == 416 {
            // Asked for the bytes after the end: a daemon killed between the last byte and the
            // rename already had the whole file. The 416's page is no part of it, and the earlier
            // attempt's response stays the task's. A 416 for another length or another version
            // means start over (one without a validator passed `If-Range`, so names ours).
            let sameVersion = head.validator == nil
                || ResumeValidation.continues(sent: sentValidator, answered: head.validator)
            guard head.contentRangeTotal == resumeOffset, sameVersion else {
                mustRestartFromZero = true
                return false
            }
            task.countOfBytesExpectedToReceive = resumeOffset
            discardsBody = true
            return true
        }
        if resumeOffset > 0 && head.statusCode == 206
            && (head.contentRangeStart != resumeOffset || !ResumeValidation.continues(sent: sentValidator, answered: head.validator)) {
            // A range we did not ask for, or a part of another version (a server that ignores
            // If-Range): never splice it in. Decided before `finishHead` records the answer's
            // validator, so the bytes on disk are never recorded as the new version's.
            mustRestartFromZero = true
            return false
        }
        finishHead()
        if !(200..<300).contains(head.statusCode) {
            // An error page: keep it apart; it is delivered (S2.5) or dropped before a retry.
            do {
                file?.close()
                let errorFile = try TransferFiles.open(errorBodyPath, O_WRONLY | O_CREAT | O_TRUNC, root: root)
                file = errorFile
                bodyIsErrorResponse = true
            } catch {
                diskFailure = TransferFailure(code: TransferFailure.cannotCreateFile, message: "cannot create \(errorBodyPath): \(error)", subject: errorBodyPath)
                return false
            }
            task.countOfBytesReceived = 0
            return true
        }
        if head.statusCode == 206 && resumeOffset == 0 && !task.requestToSend.headers.contains(where: { $0.name.isSameHTTPFieldName(as: "Range") }) {
            // Part of a resource nobody asked a part of: delivering it would hand the app a
            // piece as if it were the whole.
            protocolFailure = TransferFailure(code: TransferFailure.badServerResponse,
                                              message: "the server answered 206 (\(head.value("Content-Range") ?? "no Content-Range")) to a request for the whole resource",
                                              subject: task.requestToSend.url)
            return false
        }
        if resumeOffset > 0 {
            if head.statusCode == 206 {
                reportResume(at: resumeOffset)
                return true // continues where we are, the same version
            }
            // 200: the server ignored the range or the resource changed. Start the file over.
            do {
                try file?.truncate(to: 0)
            } catch {
                diskFailure = TransferFailure(code: TransferFailure.cannotWriteToFile, message: "cannot truncate \(partialPath): \(error)", subject: partialPath)
                return false
            }
            task.countOfBytesReceived = 0
        }
        reportResume(at: 0)
        return true
    }

    private func reportResume(at offset: Int64) {
        guard task.reportsResumeOffset else { return }
        task.reportsResumeOffset = false
        onResumed?(task, offset)
    }

    /// Records the response in the task and lets the engine persist it.
    private func finishHead() {
        task.response = ResponseRecord(url: easy.effectiveURL ?? task.requestToSend.url, statusCode: head.statusCode, headers: head.headerDictionary)
        CookieJar.keep(cookies, cookieSettings, head, from: easy.effectiveURL ?? task.requestToSend.url)
        task.currentURL = easy.effectiveURL
        task.networkProtocolName = easy.networkProtocolName
        task.redirectCount = easy.redirectCount
        let resumed = head.statusCode == 206 && resumeOffset > 0
        if (200..<300).contains(head.statusCode) { task.validator = head.validator }
        if resumed {
            task.countOfBytesExpectedToReceive = head.contentRangeTotal ?? (head.contentLength.map { $0 + resumeOffset } ?? -1)
        } else {
            task.countOfBytesExpectedToReceive = head.contentLength ?? -1
        }
        onResponse?(task)
    }

    /// Called by the engine when libcurl reports the end. On success the file is handed to
    /// `makeDurable`, which syncs and closes it when it suits the engine (the daemon's commit
    /// thread syncs every file finished in a turn together); otherwise it is closed.
    package func finish(success: Bool, makeDurable: (FileDescriptor) -> Void) -> TaskRecord {
        if !bodyStarted && success {
            // An empty body: the head is all there is.
            bodyStarted = true
            _ = beginBody()
        }
        if !success && !bodyStarted && easy.proxyConnectCode == 407 && head.statusCode == 407 {
            // libcurl ends the transfer on a refused tunnel; the head it passed on is the proxy's.
            tunnelNeedsProxyCredentials = true
            task.response = ResponseRecord(url: task.requestToSend.url, statusCode: 407, headers: head.headerDictionary)
        }
        if let file {
            let flushed = flushBeforeClosing()
            releaseUnusedReservation(of: file)
            if flushed && success {
                makeDurable(file)
            } else {
                file.close()
            }
            self.file = nil
        }
        return task
    }

    /// Stops writing (cancel, suspend, shutdown); the partial file stays, with every byte
    /// received, and without the blocks reserved past them.
    package func close() {
        if let file {
            _ = flushBeforeClosing()
            releaseUnusedReservation(of: file)
        }
        file?.close()
        file = nil
    }

    /// The file that holds this attempt's body: the partial download or an error page.
    package var bodyPath: String { bodyIsErrorResponse ? errorBodyPath : partialPath }

    /// The task as the bytes on disk describe it, for a retry: an error page of this attempt
    /// that is not the task's answer (a 503 asking to come back later, a page cut off) leaves
    /// no trace in its response and counts. Otherwise a record kept until the retry, and a
    /// daemon started from it, would take the whole file on disk for a 24-byte 503 page.
    package var taskWithoutErrorPage: TaskRecord {
        guard bodyIsErrorResponse else { return task }
        var task = task
        task.response = responseAtStart
        task.countOfBytesExpectedToReceive = expectedAtStart
        task.countOfBytesReceived = resumeOffset
        return task
    }

    /// Whether the server asked us to come back later (`RetryPolicy.serverWait`).
    package func serverWait(now: Date) -> RetryCause? { head.serverWait(now: now) }

    package var bytesMoved: Int64 { bytesOnDisk }

    package var progress: TaskProgress {
        TaskProgress(taskIdentifier: task.taskIdentifier, bytesWritten: bytesOnDisk - lastReportedBytes, totalBytesWritten: bytesOnDisk,
                     totalBytesExpectedToWrite: task.countOfBytesExpectedToReceive, state: .running, currentURL: task.currentURL, response: task.response)
    }

    /// Whether the resource can be resumed later from the bytes on disk (S6.1).
    package var isResumable: Bool {
        task.validator?.ifRangeValue != nil && head.value("Accept-Ranges")?.lowercased() != "none"
    }
}
