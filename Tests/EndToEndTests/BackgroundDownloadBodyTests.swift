import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer

/// A background session's download task whose request has a body (`httpBody`,
/// `httpBodyStream`): the daemon's downloads send no body yet, so the task is refused at
/// creation with an error saying so, and nothing reaches the server. Sending the request
/// without its body, as if nothing were wrong, would hand the app a wrong answer.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(5)))
final class BackgroundDownloadBodyTests: InProcessSuite, @unchecked Sendable {

    @Test("A background download task with httpBody or httpBodyStream ends at once with -1, and the server gets no request", arguments: ["data", "stream"])
    func bodyRefused(_ form: String) throws {
        server.serve("/report", data: Data("the report".utf8))
        let delegate = RecordingDelegate()
        let session = fixture.session("download-body-\(form)", delegate: delegate)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/report"))
        request.httpMethod = "POST"
        let body = testPayload(size: 10_000, seed: 89)
        if form == "data" { request.httpBody = body } else { request.httpBodyStream = InputStream(data: body) }
        let task = session.downloadTask(with: request)
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: -1, status: nil) }, "\(delegate.calls)")
        #expect(task.state == .completed)
        #expect((task.error as? URLError)?.failureURLString == server.url(for: "/report").absoluteString, "the error names the URL")
        #expect(session.waitUntilDurable(timeout: 10))
        #expect(server.requests.filter { $0.path == "/report" }.isEmpty, "no request without its body reached the server")
    }
}
}
