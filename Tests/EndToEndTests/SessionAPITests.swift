import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import ContainerInspection
import TransferPOSIX
import Digests

/// Tests that use the client library inside this test process. The process has one identity
/// (`AppEnvironment`) at a time, so all of them run one after another, under this suite.
@Suite(.serialized)
enum InProcess {
    static let family = try! BundleIdentifier("com.example.tests")
    static let group = try! BundleIdentifier("group.com.example.tests")
    static let app = testIdentity("com.example.tests")
    static let appExtension = testIdentity("com.example.tests.ext")
}

/// The client API against a real daemon and a real loopback server.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class SessionAPITests: InProcessSuite, @unchecked Sendable {

    @Test("Completion-handler and async task APIs, and uploads from Data or a stream, are refused with Apple's messages (S1.2, S2.1), as failed tasks or thrown errors, never traps")
    func refusedAPIs() async throws {
        let session = fixture.session("refusals", delegate: RecordingDelegate())
        let url = server.url(for: "/x")
        // Not a trap and not a throw (iOS code calls them without `try`): the task comes back
        // failed with Apple's message, which the completion handler gets too.
        let handed = Locked<[String]>([])
        let download = session.downloadTask(with: url) { _, _, error in handed.withLock { $0.append(error?.localizedDescription ?? "nil") } }
        let data = session.dataTask(with: url) { _, _, error in handed.withLock { $0.append(error?.localizedDescription ?? "nil") } }
        for task in [download, data] as [URLSessionTask] {
            #expect(task.state == .completed)
            #expect(task.error?.localizedDescription == BackgroundSessionMisuse.completionHandlersUnsupported.message)
        }
        #expect(waitUntil(timeout: 5) { handed.withLock { $0.count } == 2 })
        #expect(handed.withLock { $0 } == Array(repeating: BackgroundSessionMisuse.completionHandlersUnsupported.message, count: 2))
        await #expect(throws: BackgroundSessionMisuse.completionHandlersUnsupported) { _ = try await session.data(from: url) }
        await #expect(throws: BackgroundSessionMisuse.completionHandlersUnsupported) { _ = try await session.download(from: url) }
        #expect(session.uploadTask(with: URLRequest(url: url), from: Data()).error?.localizedDescription == BackgroundSessionMisuse.uploadFromDataUnsupported.message)
        #expect(session.uploadTask(withStreamedRequest: URLRequest(url: url)).error?.localizedDescription == BackgroundSessionMisuse.uploadFromStreamUnsupported.message)
        #expect(BackgroundSessionMisuse.completionHandlersUnsupported.message == "Completion handler blocks are not supported in background sessions. Use a delegate instead.")
        #expect(server.requests.isEmpty, "no refused task reached the server")
        session.invalidateAndCancel()
    }

    @Test("A new task is suspended and makes no traffic until resume (S2.4); then progress, the file during the call only, completion (S3.3, S7.3)")
    func downloadLifecycle() throws {
        let payload = testPayload(size: 2 << 20, seed: 42)
        var options = RouteOptions()
        options.bytesPerSecond = 8 << 20
        server.serve("/life.bin", data: payload, options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("lifecycle", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/life.bin"))
        #expect(task.state == .suspended)
        #expect(task.taskIdentifier == 1)
        #expect(!server.waitForRequests(count: 1, timeout: 0.5), "a suspended task makes no request")

        task.resume()
        #expect(task.state == .running)
        #expect(delegate.wait { if case .completed(1, _, _) = $0 { return true } else { return false } })
        let calls = delegate.calls
        #expect(calls.contains { if case .wroteData(1, _, Int64(payload.count)) = $0 { return true } else { return false } }, "progress with the expected length")
        let finished = calls.firstIndex { if case .finishedDownloading(1, true, Int64(payload.count)) = $0 { return true } else { return false } }
        let completed = calls.firstIndex(of: .completed(task: 1, code: nil, status: 200))
        #expect(finished != nil && completed != nil && finished! < completed!, "didFinishDownloadingTo, then didCompleteWithError(nil): \(calls)")
        #expect(delegate.locations.allSatisfy { !FileManager.default.fileExists(atPath: $0.path) }, "the file is gone after the call")
        #expect(task.state == .completed)
        #expect(task.countOfBytesReceived == Int64(payload.count))
        session.invalidateAndCancel()
    }

    @Test("A folder a delegate leaves where the downloaded file was is removed once didFinishDownloadingTo returns, and the file it took stays whole (S3.3)")
    func leftoverInTheFilesPlace() throws {
        let payload = testPayload(size: 40_000, seed: 7)
        server.serve("/leftover.bin", data: payload)
        let kept = container.layout.root.appendingPathComponent("kept.bin")
        let delegate = RecordingDelegate()
        delegate.afterFinishing = { location in
            try? FileManager.default.moveItem(at: location, to: kept)
            try? FileManager.default.createDirectory(at: location, withIntermediateDirectories: false)
            try? Data("left behind".utf8).write(to: location.appendingPathComponent("inside"))
        }
        let session = fixture.session("leftover", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/leftover.bin"))
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        let location = try #require(delegate.locations.first)
        #expect(!FileManager.default.fileExists(atPath: location.path), "the folder left in the file's place is gone")
        #expect(try Data(contentsOf: kept) == payload, "the file the delegate took is whole")
    }

    @Test("An HTTP 404 is not an error: didCompleteWithError(nil) with the status in task.response (S2.5)")
    func httpErrorIsNotAnError() throws {
        var options = RouteOptions()
        options.status = 404
        server.serve("/missing", data: Data(), options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("status", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/missing"))
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 404) }, "\(delegate.calls)")
        session.invalidateAndCancel()
    }

    @Test("A background download through two 302s: didFinishCollecting's metrics, before didCompleteWithError, count 2 redirects")
    func metricsCountRedirects() throws {
        let payload = testPayload(size: 20_000, seed: 31)
        server.serve("/hop-1", data: Data(), options: RouteOptions(redirectTo: "/hop-2"))
        server.serve("/hop-2", data: Data(), options: RouteOptions(redirectTo: "/landed"))
        server.serve("/landed", data: payload)
        let delegate = RecordingDelegate()
        let session = fixture.session("redirect-metrics", delegate: delegate)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: server.url(for: "/hop-1"))
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        let paths = server.requests.map(\.path).filter { $0.hasPrefix("/hop") || $0 == "/landed" }
        #expect(paths == ["/hop-1", "/hop-2", "/landed"], "the daemon followed both redirects once: \(paths)")
        let metrics = try #require(delegate.metrics(of: task.taskIdentifier), "metrics come before the completion")
        #expect(metrics.redirectCount == 2)
        #expect(metrics.transactionMetrics.last?.response?.url?.path == "/landed")
        // One response object, as Apple's: the metrics' is the task's, however often it is asked for.
        let response = try #require(task.response as? HTTPURLResponse)
        #expect(response.statusCode == 200 && response === task.response && metrics.transactionMetrics.last?.response === response)
        #expect(task.originalRequest?.url?.path == "/hop-1" && task.currentRequest?.url?.path == "/landed")
    }

    @Test("cancel() ends a running task with -999; an ftp: URL fails with -1002 when resumed")
    func cancelAndUnsupportedScheme() throws {
        var options = RouteOptions()
        options.bytesPerSecond = 256 << 10
        server.serve("/slow-cancel", data: testPayload(size: 4 << 20), options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("cancel", delegate: delegate)
        let slow = session.downloadTask(with: server.url(for: "/slow-cancel"))
        slow.resume()
        #expect(server.waitForRequests(count: 1, timeout: 10))
        slow.cancel()
        #expect(delegate.wait { if case .completed(slow.taskIdentifier, -999, _) = $0 { return true } else { return false } }, "\(delegate.calls)")

        let ftp = session.downloadTask(with: URL(string: "ftp://127.0.0.1/file")!)
        ftp.resume()
        #expect(delegate.wait { if case .completed(ftp.taskIdentifier, -1002, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        session.invalidateAndCancel()
    }

    @Test("A 3.5 MB URL fails with -1000 and 2,000 request headers with -1103, refused at creation; nothing reaches the server (README Limits)")
    func oversizedRequestsAreRefused() throws {
        let delegate = RecordingDelegate()
        let session = fixture.session("oversized", delegate: delegate)
        let long = try #require(URL(string: server.url(for: "/long").absoluteString + "?q=" + String(repeating: "a", count: 3_500_000)))
        let longTask = session.downloadTask(with: long)
        longTask.resume()
        var request = URLRequest(url: server.url(for: "/many-headers"))
        for index in 0..<2_000 { request.setValue("v", forHTTPHeaderField: "X-Header-\(index)") }
        let headersTask = session.downloadTask(with: request)
        headersTask.resume()
        // The calls are not printed: one of them carries the 3.5 MB URL.
        #expect(delegate.wait { if case .completed(longTask.taskIdentifier, -1000, _) = $0 { return true } else { return false } },
                "\(delegate.calls.count) calls, none a -1000 completion")
        #expect(delegate.wait { if case .completed(headersTask.taskIdentifier, -1103, _) = $0 { return true } else { return false } },
                "\(delegate.calls.count) calls, none a -1103 completion")
        #expect(server.requests.filter { $0.path == "/long" || $0.path == "/many-headers" }.isEmpty, "no retry, no attempt")
        session.invalidateAndCancel()
    }

    @Test("The same identifier twice in one process returns the open session; the new delegate is ignored (S1.3); getAllTasks sees suspended tasks (S7.2)")
    func sameIdentifierTwice() throws {
        server.serve("/twice", data: Data("twice".utf8))
        let first = RecordingDelegate()
        let second = RecordingDelegate()
        let a = fixture.session("twice", delegate: first)
        let task = a.downloadTask(with: server.url(for: "/twice"))
        task.taskDescription = "kept by the daemon"
        let b = fixture.session("twice", delegate: second)
        #expect(b.invalidationError == nil)
        #expect(b.delegate === first, "the first delegate stays")
        #expect(container.waitForLog { $0.message.contains("A background URLSession with identifier twice already exists!") } != nil)

        let done = DispatchSemaphore(value: 0)
        let seen = Locked<[URLSessionTask]>([])
        b.getAllTasks { tasks in
            seen.withLock { $0 = tasks }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let tasks = seen.withLock { $0 }
        #expect(tasks.count == 1)
        #expect(tasks.first === task, "the same task object")
        #expect(tasks.first?.state == .suspended)
        #expect(tasks.first?.taskDescription == "kept by the daemon")
        let snapshot = ContainerSnapshot.read(container.layout, sessionFilter: "twice")
        #expect(snapshot.sessions.first?.tasks.first?.taskDescription == "kept by the daemon", "the description is durable")

        task.resume()
        #expect(first.wait { if case .completed(task.taskIdentifier, nil, 200) = $0 { return true } else { return false } })
        #expect(second.calls.isEmpty)
        a.invalidateAndCancel()
    }

    @Test("invalidateAndCancel ends every task with -999 in the daemon, then didBecomeInvalidWithError(nil) last (S1.4)")
    func invalidateAndCancel() throws {
        var options = RouteOptions()
        options.bytesPerSecond = 128 << 10
        server.serve("/inv", data: testPayload(size: 2 << 20), options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("invalidate", delegate: delegate)
        let running = session.downloadTask(with: server.url(for: "/inv"))
        running.resume()
        let suspended = session.downloadTask(with: server.url(for: "/inv"))
        session.invalidateAndCancel()
        #expect(delegate.wait { $0 == .invalid(code: nil) })
        let calls = delegate.calls
        #expect(calls.contains { if case .completed(running.taskIdentifier, -999, _) = $0 { return true } else { return false } })
        #expect(calls.contains { if case .completed(suspended.taskIdentifier, -999, _) = $0 { return true } else { return false } })
        #expect(calls.last == .invalid(code: nil), "invalidation comes last: \(calls)")
        let snapshot = ContainerSnapshot.read(container.layout, sessionFilter: "invalidate")
        #expect(snapshot.sessions.first?.tasks.isEmpty == true, "no task left in the daemon")
    }

    @Test("finishTasksAndInvalidate lets running tasks finish, then invalidates (S1.4)")
    func finishTasksAndInvalidate() throws {
        server.serve("/finish", data: testPayload(size: 1 << 20, seed: 9))
        let delegate = RecordingDelegate()
        let session = fixture.session("finish", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/finish"))
        task.resume()
        session.finishTasksAndInvalidate()
        #expect(delegate.wait { $0 == .invalid(code: nil) })
        let calls = delegate.calls
        #expect(calls.contains(.completed(task: task.taskIdentifier, code: nil, status: 200)), "the task finished normally: \(calls)")
        #expect(calls.last == .invalid(code: nil))
    }

    @Test("An extension's session without sharedContainerIdentifier is invalidated with -995 (S1.5)")
    func extensionNeedsSharedContainer() throws {
        AppEnvironment.bootstrap(identity: InProcess.appExtension, layout: container.layout, isForeground: false)
        defer { AppEnvironment.bootstrap(identity: InProcess.app, layout: container.layout, isForeground: true) }
        let delegate = RecordingDelegate()
        let configuration = URLSessionConfiguration.background(withIdentifier: "ext.nocontainer")
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        #expect(session.invalidationError.map { ($0 as NSError).code } == -995)
        #expect(delegate.wait { $0 == .invalid(code: -995) })
    }
}

}

