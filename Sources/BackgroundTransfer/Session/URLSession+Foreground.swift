import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// A default session's data and upload tasks, which FoundationNetworking carries out behind
/// this library's objects (`ForegroundSession`, `ForegroundBridge`), with Apple's signatures.
extension URLSession {
    /// What a data task does with the response it got (Apple's values).
    public enum ResponseDisposition: Int, Sendable {
        /// End the task with -999, reading no body (as Apple does; corelibs reads it).
        case cancel = 0
        /// Go on: the body comes to `didReceive data`.
        case allow = 1
        /// Go on as a download task (`didBecome downloadTask`), whose file goes to
        /// `didFinishDownloadingTo`.
        case becomeDownload = 2
        /// Not offered: the task ends with -1 saying so.
        case becomeStream = 3
    }

    /// An upload of `bodyData` (or of the request's own body when nil) whose answer goes to
    /// `completionHandler` on the delegate queue. Refused in background sessions (S1.2).
    public func uploadTask(with request: URLRequest, from bodyData: Data?, completionHandler: @escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionUploadTask {
        foregroundTask(request, body: bodyData.map { .data($0) } ?? .request, kind: .upload, as: { URLSessionUploadTask(record: $0, backend: nil) }, handler: completionHandler)
    }

    /// An upload of the file at `fileURL` whose answer goes to `completionHandler`. Refused in background sessions (S1.2).
    public func uploadTask(with request: URLRequest, fromFile fileURL: URL, completionHandler: @escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionUploadTask {
        foregroundTask(request, body: .file(fileURL), kind: .upload, as: { URLSessionUploadTask(record: $0, backend: nil) }, handler: completionHandler)
    }

    /// The response body, with `delegate` as the task's own delegate (redirects, challenges,
    /// progress). Default sessions; refused in background sessions (S1.2).
    public func data(for request: URLRequest, delegate: URLSessionTaskDelegate? = nil) async throws -> (Data, URLResponse) {
        try await awaited(delegate) { self.dataTask(with: request, completionHandler: $0) }
    }

    /// The response body of a GET of `url`, as `data(for:delegate:)`.
    public func data(from url: URL, delegate: URLSessionTaskDelegate? = nil) async throws -> (Data, URLResponse) {
        try await data(for: URLRequest(url: url), delegate: delegate)
    }

    /// Uploads `bodyData`; the server's answer. Refused in background sessions (S1.2).
    public func upload(for request: URLRequest, from bodyData: Data, delegate: URLSessionTaskDelegate? = nil) async throws -> (Data, URLResponse) {
        try await awaited(delegate) { self.uploadTask(with: request, from: bodyData, completionHandler: $0) }
    }

    /// Uploads the file at `fileURL`; the server's answer. Refused in background sessions (S1.2).
    public func upload(for request: URLRequest, fromFile fileURL: URL, delegate: URLSessionTaskDelegate? = nil) async throws -> (Data, URLResponse) {
        try await awaited(delegate) { self.uploadTask(with: request, fromFile: fileURL, completionHandler: $0) }
    }

    /// Runs the completion-handler task `make` creates, with `delegate` as its own, and
    /// returns what its handler got; cancelling the Swift task cancels it.
    private func awaited(_ delegate: URLSessionTaskDelegate?, _ make: (@escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionTask) async throws -> (Data, URLResponse) {
        guard configuration.identifier == nil else { throw BackgroundSessionMisuse.completionHandlersUnsupported }
        let box = Locked<URLSessionTask?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = make { data, response, error in
                    if let response, error == nil { continuation.resume(returning: (data ?? Data(), response)) } else {
                        continuation.resume(throwing: error ?? URLError(.badServerResponse))
                    }
                }
                if let delegate { task.delegate = delegate }
                box.withLock { $0 = task }
                task.resume()
            }
        } onCancel: {
            box.withLock { $0 }?.cancel()
        }
    }

    /// A data or upload task of a default session, made in FoundationNetworking; a delegate
    /// data task of a background session (`backgroundDataTask`). Otherwise, in a background
    /// session or one that is invalid, the task comes back failed (with `refusal`, or Apple's
    /// message for completion handlers), as `handler` also hears.
    func foregroundTask<Task: URLSessionTask>(_ request: URLRequest, body: ForegroundBody, kind: TaskKind, as make: @escaping (TaskRecord) -> Task,
                                              handler: (@Sendable (Data?, URLResponse?, Error?) -> Void)? = nil, refusal: String? = nil) -> Task {
        let creation = TaskCreation(kind: kind, request: record(of: request))
        let refused: Task
        if configuration.identifier != nil, handler == nil, refusal == nil {
            return backgroundDataTask(request, creation: creation, as: make)
        } else if configuration.identifier != nil {
            let message = handler != nil ? BackgroundSessionMisuse.completionHandlersUnsupported.message : refusal ?? ""
            refused = refusedTask(creation, TransferFailure(code: TransferFailure.unknown, message: message, subject: configuration.identifier), as: make)
        } else if let local = core as? LocalSessionCore, !local.isInvalidated {
            let task = local.createForegroundTask(request, body: body, creation: creation, as: make, handler: handler)
            if let delegate = delegate as? URLSessionTaskDelegate {
                delegateQueue.addOperation { delegate.urlSession(self, didCreateTask: task) }
            }
            return task
        } else {
            refused = makeTask(creation, as: make) // fails: the session is invalid
        }
        if let handler {
            let error = refused.error
            delegateQueue.addOperation { handler(nil, nil, error) }
        }
        return refused
    }

    /// Why a download task cannot be made for `request`: this process's transport sends no
    /// request body, so a default session refuses any; a background session's daemon sends an
    /// `httpBody` of up to `TransferLimits.requestBodyBytes` (-1103 past it) but no
    /// `httpBodyStream` (Apple's rule: bodies in background sessions come from a file). A
    /// body is never dropped quietly.
    func downloadBodyRefusal(_ request: URLRequest) -> TransferFailure? {
        guard request.httpBody != nil || request.httpBodyStream != nil else { return nil }
        let method = request.httpMethod ?? "GET"
        let url = request.url?.absoluteString ?? ""
        if configuration.identifier == nil {
            return TransferFailure(code: TransferFailure.unknown,
                                   message: "a default session's download task sends no request body here: use a data or upload task for \(method) with a body", subject: url)
        }
        return NewRequestBody(of: request).refusal(url: url)
    }
}
