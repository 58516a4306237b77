import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests

/// Authentication challenges answered by an attached app, credentials by persistence, the
/// proxy's 407, request headers and their redaction, refreshed headers before a retry.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class AuthenticationTests: InProcessSuite, @unchecked Sendable {
    static let users = ["alice": "correct horse"]


    func challenges(_ delegate: RecordingDelegate) -> [RecordingDelegate.Call] {
        delegate.calls.filter { if case .challenge = $0 { return true } else { return false } }
    }

    @Test("A 401 with Basic asks the attached app (task-level, with host, port, realm and scheme); its .forSession credential finishes the task and serves the session's next task without asking (S3.1)")
    func basicAnsweredByAttachedApp() throws {
        let payload = testPayload(size: 200 << 10, seed: 21)
        server.serve("/basic/file.bin", data: payload)
        server.serve("/basic/other.bin", data: payload)
        server.protect("/basic", with: .basic(realm: "files", users: Self.users))
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.useCredential, URLCredential(user: "alice", password: "correct horse", persistence: .forSession)) }
        let session = fixture.session("basic", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/basic/file.bin"))
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        #expect(challenges(delegate) == [.challenge(task: task.taskIdentifier, method: NSURLAuthenticationMethodHTTPBasic, realm: "files", previousFailures: 0, proxy: false)])
        let asked = delegate.challenges.first
        #expect(asked?.protectionSpace.host == "127.0.0.1")
        #expect((asked?.failureResponse as? HTTPURLResponse)?.statusCode == 401)

        let next = session.downloadTask(with: server.url(for: "/basic/other.bin"))
        next.resume()
        #expect(delegate.wait(for: completed(next, status: 200)))
        #expect(challenges(delegate).count == 1, "the session's credential is sent at once")
        #expect(server.authenticationCounts(at: "/basic/other.bin") == AuthenticationCounts(acceptedUsers: ["alice"]))
        session.invalidateAndCancel()
    }

    @Test("Digest challenges are answered too", arguments: [Protection.DigestAlgorithm.md5, .sha256])
    func digestAnswered(_ algorithm: Protection.DigestAlgorithm) throws {
        server.serve("/digest/file.bin", data: Data("digest".utf8))
        server.protect("/digest", with: .digest(algorithm, realm: "digest-realm", users: Self.users))
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.useCredential, URLCredential(user: "alice", password: "correct horse", persistence: .none)) }
        let session = fixture.session("digest", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/digest/file.bin"))
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
        #expect(challenges(delegate) == [.challenge(task: task.taskIdentifier, method: NSURLAuthenticationMethodHTTPDigest, realm: "digest-realm", previousFailures: 0, proxy: false)])
        #expect(server.authenticationCounts(at: "/digest/file.bin").acceptedUsers == ["alice"])
        session.invalidateAndCancel()
    }

    @Test("A refused password is asked about again with previousFailureCount counting; when the app gives up the 401 is delivered (S2.5)")
    func wrongPasswordFailsAfterTheAppGivesUp() throws {
        server.serve("/wrong/file.bin", data: Data("never".utf8))
        server.protect("/wrong", with: .basic(realm: "wrong", users: Self.users))
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { challenge in
            challenge.previousFailureCount < 2
                ? (.useCredential, URLCredential(user: "alice", password: "guess \(challenge.previousFailureCount)", persistence: .none))
                : (.performDefaultHandling, nil)
        }
        let session = fixture.session("wrong", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/wrong/file.bin"))
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 401)), "\(delegate.calls)")
        #expect(challenges(delegate).map { if case .challenge(_, _, _, let failures, _) = $0 { failures } else { -1 } } == [0, 1, 2])
        #expect(server.authenticationCounts(at: "/wrong/file.bin").failures == 2)
        session.invalidateAndCancel()
    }

    @Test("An upload behind Basic or Digest: the body reaches the server whole once the app answers", arguments: [Protection.basic(realm: "inbox", users: users), .digest(.sha256, realm: "inbox", users: users)])
    func uploadBehindAuthentication(_ protection: Protection) throws {
        let body = testPayload(size: 3 << 20, seed: 51)
        let group = container.layout.appGroup(InProcess.group)
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        let file = group.appendingPathComponent("auth-upload.bin")
        try body.write(to: file)
        server.acceptUploads(at: "/inbox/up", options: UploadOptions(storage: .hash))
        server.protect("/inbox", with: protection)
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.useCredential, URLCredential(user: "alice", password: "correct horse", persistence: .forSession)) }
        let session = fixture.session("auth-upload", delegate: delegate)
        var request = URLRequest(url: server.url(for: "/inbox/up"))
        request.httpMethod = "PUT"
        let task = session.uploadTask(with: request, fromFile: file)
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 201)), "\(delegate.calls)")
        #expect(challenges(delegate).count == 1)
        #expect(server.receivedUploads(at: "/inbox/up").map(\.sha256) == [SHA256.hexDigest(of: body)], "stored once, whole")
        session.invalidateAndCancel()
    }

    @Test("cancelAuthenticationChallenge ends the task with -999")
    func cancelledChallenge() throws {
        server.serve("/cancel/file.bin", data: Data("never".utf8))
        server.protect("/cancel", with: .basic(realm: "cancel", users: Self.users))
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.cancelAuthenticationChallenge, nil) }
        let session = fixture.session("cancel", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/cancel/file.bin"))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -999, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(server.authenticationCounts(at: "/cancel/file.bin") == AuthenticationCounts(challenges: 1))
        session.invalidateAndCancel()
    }

    @Test("A .permanent credential is kept in the app's private container (0600) and serves its other sessions; it is in no task record, event or inspection")
    func permanentCredentialIsPrivate() throws {
        server.serve("/kept/a.bin", data: Data("a".utf8))
        server.serve("/kept/b.bin", data: Data("b".utf8))
        server.protect("/kept", with: .basic(realm: "kept", users: Self.users))
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.useCredential, URLCredential(user: "alice", password: "correct horse", persistence: .permanent)) }
        let first = fixture.session("kept-1", delegate: delegate)
        let task = first.downloadTask(with: server.url(for: "/kept/a.bin"))
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")

        let store = container.layout.privateContainer(InProcess.family).appendingPathComponent("Library/BackgroundTransfer/credentials.json")
        let mode = ((try? FileManager.default.attributesOfItem(atPath: store.path)[.posixPermissions]) as? NSNumber)?.intValue
        #expect(mode == 0o600, "stored private to the app")
        let otherDelegate = RecordingDelegate()
        let second = fixture.session("kept-2", delegate: otherDelegate)
        let other = second.downloadTask(with: server.url(for: "/kept/b.bin"))
        other.resume()
        #expect(otherDelegate.wait(for: completed(other, status: 200)))
        #expect(challenges(otherDelegate).isEmpty, "the app's permanent credential is used without asking")
        #expect(secretOccurrences("correct horse", outside: container.layout.privateContainer(InProcess.family)).isEmpty)
        first.invalidateAndCancel()
        second.invalidateAndCancel()
    }

    @Test("A 407 from the session's proxy (connectionProxyDictionary) asks for the proxy's credential")
    func proxyChallenge() throws {
        server.serve("/via-proxy.bin", data: Data("proxied".utf8))
        server.requireProxyAuthentication(.basic(realm: "proxy", users: ["bob": "proxy pass"]))
        let delegate = RecordingDelegate()
        delegate.challengeAnswer = { _ in (.useCredential, URLCredential(user: "bob", password: "proxy pass", persistence: .forSession)) }
        let session = fixture.session("proxied", delegate: delegate) {
            $0.connectionProxyDictionary = ["HTTPEnable": 1, "HTTPProxy": "127.0.0.1", "HTTPPort": Int(self.server.port)]
        }
        let task = session.downloadTask(with: server.url(for: "/via-proxy.bin"))
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
        #expect(challenges(delegate) == [.challenge(task: task.taskIdentifier, method: NSURLAuthenticationMethodHTTPBasic, realm: "proxy", previousFailures: 0, proxy: true)])
        #expect(delegate.challenges.first?.protectionSpace.proxyType == NSURLProtectionSpaceHTTPProxy)
        #expect(server.authenticationCounts(at: "/via-proxy.bin", proxy: true).acceptedUsers == ["bob"])
        session.invalidateAndCancel()
    }

    @Test("The request's headers and httpAdditionalHeaders are sent; Authorization is redacted in inspection and logs")
    func headersSentAndRedacted() throws {
        server.serve("/headers.bin", data: Data("h".utf8))
        let delegate = RecordingDelegate()
        let session = fixture.session("headers", delegate: delegate) { $0.httpAdditionalHeaders = ["X-Client": "bgt-tests"] }
        var request = URLRequest(url: server.url(for: "/headers.bin"))
        request.setValue("Bearer top-secret-token", forHTTPHeaderField: "Authorization")
        request.setValue("custom", forHTTPHeaderField: "X-Custom")
        let task = session.downloadTask(with: request)
        task.suspend()
        let inspect = try Executable.bgtransfer.run(["inspect", "--json"], in: container)
        #expect(inspect.stdout.contains("<redacted>") && !inspect.stdout.contains("top-secret-token"), "\(inspect.stdout)")
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)))
        let sent = try #require(server.requests.first { $0.path == "/headers.bin" })
        #expect(sent.header("Authorization") == "Bearer top-secret-token")
        #expect(sent.header("X-Client") == "bgt-tests")
        #expect(sent.header("X-Custom") == "custom")
        let log = try Executable.bgtransfer.run(["log", "--level", "debug"], in: container)
        #expect(!log.stdout.contains("top-secret-token"))
        session.invalidateAndCancel()
    }

    @Test("Before a retry the attached app may refresh headers (willRetry, ours): the retry sends the new token")
    func tokenRefreshedBeforeRetry() throws {
        let payload = testPayload(size: 2 << 20, seed: 31)
        var dropping = RouteOptions()
        dropping.dropAfterBytes = 512 << 10
        server.serve("/token.bin", data: payload, options: dropping)
        let delegate = RecordingDelegate()
        let server = self.server
        delegate.retryHeaders = { _ in
            server.serve("/token.bin", data: payload) // the next attempt gets through
            return ["Authorization": "Bearer fresh"]
        }
        let session = fixture.session("token", delegate: delegate)
        var request = URLRequest(url: server.url(for: "/token.bin"))
        request.setValue("Bearer stale", forHTTPHeaderField: "Authorization")
        let task = session.downloadTask(with: request)
        task.resume()
        #expect(delegate.wait(for: { if case .completed(task.taskIdentifier, nil, _) = $0 { return true } else { return false } }), "\(delegate.calls)")
        #expect(delegate.calls.contains(.willRetry(task: task.taskIdentifier)))
        let tokens = server.requests.filter { $0.path == "/token.bin" }.map { $0.header("Authorization") }
        #expect(tokens == ["Bearer stale", "Bearer fresh"], "\(tokens)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        session.invalidateAndCancel()
    }

    /// Files of the container outside `allowed` that contain `secret` (or its Basic form).
    func secretOccurrences(_ secret: String, outside allowed: URL) -> [String] {
        secretFiles(in: container, containing: [secret, Data("alice:\(secret)".utf8).base64EncodedString()], outside: allowed.path)
    }
}
}

/// Files under the container, outside `allowed`, whose bytes contain any of `secrets`.
func secretFiles(in container: TestContainer, containing secrets: [String], outside allowed: String) -> [String] {
    var found: [String] = []
    guard let walker = FileManager.default.enumerator(atPath: container.root) else { return [] }
    while let relative = walker.nextObject() as? String {
        let path = container.root + "/" + relative
        guard !path.hasPrefix(allowed + "/"), let data = FileManager.default.contents(atPath: path) else { continue }
        if secrets.contains(where: { data.range(of: Data($0.utf8)) != nil }) { found.append(relative) }
    }
    return found
}
