import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferPOSIX

/// A default session's 401 that no credential answers ends the task with that response and
/// no error (S9.3); its completion handler, and the async form, get the 401's body with it,
/// as Apple's do (the server's explanation is often in it).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class UnansweredChallengeBodyTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// What the loopback server sends with its 401.
    static let challengeBody = Data("401 Unauthorized\n".utf8)

    /// What the completion handler of the task `make` creates in an ephemeral session got.
    func handlerOutcome(_ make: (URLSession, @escaping @Sendable (Data?, URLResponse?, Error?) -> Void) -> URLSessionTask) throws -> (data: Data?, status: Int?, error: Error?) {
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let got = Locked<(Data?, Int?, Error?)?>(nil)
        let done = DispatchSemaphore(value: 0)
        make(session) { data, response, error in
            got.withLock { $0 = (data, (response as? HTTPURLResponse)?.statusCode, error) }
            done.signal()
        }.resume()
        #expect(done.wait(timeout: .now() + 20) == .success, "the handler was called")
        return try #require(got.withLock { $0 })
    }

    @Test("A completion handler gets the 401's status and body, and no error, when no credential answers the challenge: data tasks, uploads from Data and from a file",
          arguments: ["data task", "upload from Data", "upload from a file"])
    func handlerGetsBody(_ form: String) throws {
        server.serve("/locked/report", data: Data("the report".utf8))
        server.acceptUploads(at: "/locked/inbox")
        server.protect("/locked", with: .basic(users: ["ada": "lovelace"]))
        var upload = URLRequest(url: server.url(for: "/locked/inbox"))
        upload.httpMethod = "PUT"
        let body = Data("the letter".utf8)
        let file = container.appGroup.appendingPathComponent("letter.txt")
        try FileManager.default.createDirectory(at: container.appGroup, withIntermediateDirectories: true)
        try body.write(to: file)
        let (data, status, error) = try handlerOutcome { session, handler in
            switch form {
            case "data task": session.dataTask(with: server.url(for: "/locked/report"), completionHandler: handler)
            case "upload from Data": session.uploadTask(with: upload, from: body, completionHandler: handler)
            default: session.uploadTask(with: upload, fromFile: file, completionHandler: handler)
            }
        }
        #expect(status == 401)
        #expect(error == nil)
        #expect(data == Self.challengeBody, "\(data.map { String(decoding: $0, as: UTF8.self) } ?? "nil")")
    }

    @Test("upload(for:from:) returns the 401's body with it")
    func asyncUploadGetsBody() async throws {
        server.acceptUploads(at: "/locked/inbox")
        server.protect("/locked", with: .basic(users: ["ada": "lovelace"]))
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/locked/inbox"))
        request.httpMethod = "POST"
        let (data, response) = try await session.upload(for: request, from: Data("the letter".utf8))
        #expect((response as? HTTPURLResponse)?.statusCode == 401)
        #expect(data == Self.challengeBody)
    }

    @Test("A background upload whose 401 no credential answers hands the 401's body to didReceive data, then ends with that status and no error")
    func backgroundUploadGetsBody() throws {
        _ = try DaemonUnderTest.start(container)
        server.acceptUploads(at: "/locked/inbox")
        server.protect("/locked", with: .basic(users: ["ada": "lovelace"]))
        let group = container.layout.appGroup(InProcess.group)
        let file = group.appendingPathComponent("letter.txt")
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        try Data("the letter".utf8).write(to: file)
        let delegate = RecordingDelegate() // default handling, and no credential stored
        let session = fixture.session("upload-401", delegate: delegate)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/locked/inbox"))
        request.httpMethod = "PUT"
        let task = session.uploadTask(with: request, fromFile: file)
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 401) }, "\(delegate.calls)")
        #expect(delegate.receivedBodies[task.taskIdentifier] == Self.challengeBody, "\(delegate.calls)")
    }

    @Test("data(from:) returns the 401's body with it")
    func asyncGetsBody() async throws {
        server.serve("/locked/report", data: Data("the report".utf8))
        server.protect("/locked", with: .basic(users: ["ada": "lovelace"]))
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let (data, response) = try await session.data(from: server.url(for: "/locked/report"))
        #expect((response as? HTTPURLResponse)?.statusCode == 401)
        #expect(data == Self.challengeBody)
    }
}
}
