import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import StandInSupport
import ContainerInspection
import Digests
import TransferLogging
import TransferPOSIX

/// What an adopter's app meets first (issue 18): a daemon that cannot be found, calls the
/// backend refuses, long bundle identifiers, the request's own settings. Nothing an app
/// passes may trap the process, and a task the daemon has not accepted never looks accepted.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class AdoptionTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    /// Runs `body` with the library seeing `BGTRANSFER_TRANSFERD` set to `value`. Given at
    /// bootstrap, not with `setenv`: other tests' threads read `environ` meanwhile (to start
    /// processes), and `setenv` may move it under them.
    func withDaemonExecutable(_ value: String, _ body: () throws -> Void) rethrows {
        AppEnvironment.bootstrap(identity: InProcess.app, layout: container.layout, isForeground: true,
                                 environment: ProcessInfo.processInfo.environment.merging(["BGTRANSFER_TRANSFERD": value]) { $1 })
        defer { AppEnvironment.bootstrap(identity: InProcess.app, layout: container.layout, isForeground: true) }
        try body()
    }

    @Test("No transferd where BGTRANSFER_TRANSFERD says: the session is invalid with -1004 naming the daemon, and a task fails visibly (issue 18, finding 1)")
    func missingDaemonInvalidatesTheSession() throws {
        server.serve("/never", data: Data("never".utf8))
        try withDaemonExecutable("/nonexistent/bin/transferd") {
            let delegate = RecordingDelegate()
            let session = fixture.session("nodaemon", delegate: delegate)
            let error = try #require(session.invalidationError, "a session whose daemon cannot be started is invalid")
            #expect((error as NSError).code == URLError.cannotConnectToHost.rawValue)
            #expect(error.localizedDescription.contains("/nonexistent/bin/transferd"), "the error names the daemon: \(error.localizedDescription)")
            #expect(delegate.wait(timeout: 10) { $0 == .invalid(code: -1004) }, "didBecomeInvalidWithError: \(delegate.calls)")

            let task = session.downloadTask(with: server.url(for: "/never"))
            #expect(task.state == .completed, "a task the daemon never accepted does not look accepted")
            #expect((task.error as NSError?)?.code == -1004)
            task.resume()
            #expect(delegate.wait(timeout: 10) { $0 == .completed(task: task.taskIdentifier, code: -1004, status: nil) }, "\(delegate.calls)")
            #expect(!server.waitForRequests(count: 1, timeout: 0.5))
        }
    }

    @Test("A refused hello: task creation on the invalid session fails the task, it does not trap (issue 18, finding 2)")
    func refusedHelloDoesNotTrap() throws {
        _ = try DaemonUnderTest.start(container)
        let group = try BundleIdentifier("group.org.stranger")
        let stranger = AppIdentity(bundleIdentifier: try BundleIdentifier("org.stranger.app"), kind: .app, containingApp: try BundleIdentifier("org.stranger.app"), containingAppExecutable: "stranger", appGroups: [group])
        AppEnvironment.bootstrap(identity: stranger, layout: container.layout, isForeground: true)
        defer { AppEnvironment.bootstrap(identity: InProcess.app, layout: container.layout, isForeground: true) }
        let delegate = RecordingDelegate()
        let configuration = URLSessionConfiguration.background(withIdentifier: "stranger")
        configuration.sharedContainerIdentifier = group.rawValue
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        #expect((session.invalidationError as NSError?)?.code == -1011)

        let download = session.downloadTask(with: server.url(for: "/x"))
        let resumed = session.downloadTask(withResumeData: Data("not resume data".utf8))
        let file = container.parent.appendingPathComponent("upload.bin")
        try Data("body".utf8).write(to: file)
        var request = URLRequest(url: server.url(for: "/up"))
        request.httpMethod = "PUT"
        let upload = session.uploadTask(with: request, fromFile: file)
        for task in [download, resumed, upload] as [URLSessionTask] {
            #expect(task.state == .completed)
            #expect((task.error as NSError?)?.code == -1011)
            #expect(delegate.wait(timeout: 10) { $0 == .completed(task: task.taskIdentifier, code: -1011, status: nil) }, "\(delegate.calls)")
        }
        #expect(Set([download, resumed, upload].map(\.taskIdentifier)).count == 3, "each failed task has its own identifier")
        session.invalidateAndCancel() // on an invalid session: nothing, and no trap
        session.finishTasksAndInvalidate()
    }

    @Test("A default session refuses resume data with an error on the task, not a trap (issue 18, finding 2); its uploads run (issue 27)")
    func defaultSessionRefusalsDoNotTrap() throws {
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let resumed = session.downloadTask(withResumeData: Data("not resume data".utf8))
        resumed.resume()
        #expect(delegate.wait(timeout: 10) { if case .completed(resumed.taskIdentifier, .some, nil) = $0 { return true } else { return false } }, "\(delegate.calls)")

        let file = container.parent.appendingPathComponent("upload.bin")
        try Data("body".utf8).write(to: file)
        var request = URLRequest(url: server.url(for: "/up"))
        request.httpMethod = "PUT"
        let upload = session.uploadTask(with: request, fromFile: file)
        #expect(upload.taskIdentifier != resumed.taskIdentifier)
        upload.resume()
        // No upload route there: the server's 404 is the answer, not an error (S2.5).
        #expect(delegate.wait(timeout: 10) { $0 == .completed(task: upload.taskIdentifier, code: nil, status: 404) }, "\(delegate.calls)")
        session.invalidateAndCancel()
    }

    @Test("A default session continues a background session's download from its resume data (Range, didResumeAtOffset)")
    func defaultSessionTakesResumeData() throws {
        _ = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 3 << 20, seed: 44)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20
        server.serve("/handback.bin", data: payload, options: slow)
        let background = fixture.session("handback", delegate: RecordingDelegate())
        let first = background.downloadTask(with: server.url(for: "/handback.bin"))
        first.resume()
        let data = try #require(cancelPartWay(first, after: 512 << 10).data)
        server.serve("/handback.bin", data: payload) // full speed now

        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let task = session.downloadTask(withResumeData: data)
        #expect(task.state == .suspended)
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, 206) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        #expect(delegate.calls.contains { if case .resumed(task.taskIdentifier, let offset, Int64(payload.count)) = $0 { return offset > 0 } else { return false } }, "\(delegate.calls)")
        #expect(server.requests.last { $0.path == "/handback.bin" }?.header("Range")?.hasPrefix("bytes=") == true)
        session.invalidateAndCancel()
        background.invalidateAndCancel()
    }

    @Test("Numbers no JSON can carry (a NaN priority, an infinite timeout, a NaN date) and requests too large for the wire neither trap nor stall the session: the task runs or fails with an error")
    func unencodableNumbersDoNotStall() throws {
        _ = try DaemonUnderTest.start(container)
        server.serve("/nan.bin", data: Data("nan".utf8))
        let delegate = RecordingDelegate()
        let session = fixture.session("nan", delegate: delegate)
        var request = URLRequest(url: server.url(for: "/nan.bin"))
        request.timeoutInterval = .infinity
        let first = session.downloadTask(with: request)
        first.priority = .nan
        first.resume()
        #expect(delegate.wait { $0 == .completed(task: first.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        let second = session.downloadTask(with: server.url(for: "/nan.bin"))
        second.earliestBeginDate = Date(timeIntervalSinceReferenceDate: .nan)
        second.resume()
        #expect(delegate.wait { if case .completed(second.taskIdentifier, _, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        // A request too large for the wire (a 5 MiB header) fails its task; it does not stall the session.
        var huge = URLRequest(url: server.url(for: "/nan.bin"))
        huge.setValue(String(repeating: "x", count: 5 << 20), forHTTPHeaderField: "X-Huge")
        let oversized = session.downloadTask(with: huge)
        oversized.resume()
        #expect(delegate.wait { $0 == .completed(task: oversized.taskIdentifier, code: -1011, status: nil) }, "\(delegate.calls.suffix(3))")
        let third = session.downloadTask(with: server.url(for: "/nan.bin"))
        third.resume()
        #expect(delegate.wait { $0 == .completed(task: third.taskIdentifier, code: nil, status: 200) }, "the session goes on: \(delegate.calls)")
        #expect(session.waitUntilDurable(timeout: 10), "nothing is left waiting for an answer")
        session.invalidateAndCancel()
    }

    @Test("A valid bundle identifier of 195 characters has a default session identifier (issue 18, finding 2)")
    func longBundleIdentifier() throws {
        let long = try BundleIdentifier("com." + String(repeating: "a", count: 191))
        let other = try BundleIdentifier("com." + String(repeating: "a", count: 190) + "b")
        #expect(long.rawValue.count == 195)
        let identity = AppIdentity(bundleIdentifier: long, kind: .app, containingApp: long, containingAppExecutable: "app", appGroups: [])
        let sibling = AppIdentity(bundleIdentifier: other, kind: .app, containingApp: other, containingAppExecutable: "app", appGroups: [])
        let identifier = identity.defaultSessionIdentifier
        #expect(identifier.rawValue.utf8.count <= SessionIdentifier.maximumLength)
        #expect(identifier == identity.defaultSessionIdentifier, "stable")
        #expect(identifier != sibling.defaultSessionIdentifier, "distinct for distinct bundles")
        #expect(StandInIdentities.host.defaultSessionIdentifier.rawValue == "com.example.host.background", "short identifiers keep their form")
    }

    @Test("didWriteData after a resume counts the bytes of each write, not the total (issue 18, finding 5)")
    func didWriteDataAfterResume() throws {
        _ = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 3 << 20, seed: 5)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20
        server.serve("/written.bin", data: payload, options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("written", delegate: delegate)
        let first = session.downloadTask(with: server.url(for: "/written.bin"))
        first.resume()
        let data = try #require(cancelPartWay(first, after: 512 << 10).data)
        let second = session.downloadTask(withResumeData: data)
        second.resume()
        #expect(delegate.wait { if case .completed(second.taskIdentifier, nil, 206) = $0 { return true } else { return false } }, "\(delegate.calls)")
        let offset = try #require(delegate.calls.compactMap { call -> Int64? in
            if case .resumed(second.taskIdentifier, let offset, _) = call { return offset } else { return nil }
        }.first)
        let writes = delegate.writes(of: second.taskIdentifier)
        try #require(!writes.isEmpty)
        var previous = offset
        for write in writes {
            #expect(write.bytesWritten == write.total - previous, "bytesWritten \(write.bytesWritten) at total \(write.total) after \(previous)")
            previous = write.total
        }
        #expect(writes[0].bytesWritten < writes[0].total, "the first write after resuming at \(offset) is not the whole total")
        session.invalidateAndCancel()
    }

    @Test("URLRequest.timeoutInterval is kept; every request carries a User-Agent naming the app and the library (issue 18, finding 6)")
    func requestTimeoutAndUserAgent() throws {
        _ = try DaemonUnderTest.start(container)
        server.serve("/agent", data: Data("agent".utf8))
        let delegate = RecordingDelegate()
        let session = fixture.session("agent", delegate: delegate)
        var request = URLRequest(url: server.url(for: "/agent"))
        request.timeoutInterval = 17
        let task = session.downloadTask(with: request)
        #expect(task.originalRequest?.timeoutInterval == 17)
        #expect(session.waitUntilDurable())
        let snapshot = ContainerSnapshot.read(container.layout, sessionFilter: "agent")
        #expect(snapshot.sessions.first?.tasks.first?.originalRequest.timeoutInterval == 17, "the daemon's record has the request's timeout")
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        let agent = try #require(server.requests.first { $0.path == "/agent" }?.header("User-Agent"), "a User-Agent is sent")
        #expect(agent.contains("BackgroundTransfer/"), "names the library: \(agent)")
        #expect(agent.contains(InProcess.app.bundleIdentifier.rawValue), "names the app: \(agent)")

        // The app's own User-Agent wins.
        var own = URLRequest(url: server.url(for: "/agent"))
        own.setValue("Mine/2.0", forHTTPHeaderField: "User-Agent")
        let mine = session.downloadTask(with: own)
        mine.resume()
        #expect(delegate.wait { $0 == .completed(task: mine.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(server.requests.last { $0.path == "/agent" }?.header("User-Agent") == "Mine/2.0")
        session.invalidateAndCancel()
    }

    @Test("An upload from the app's tmp/ (BackgroundApplication.shared.temporaryDirectory) is allowed, as on iOS; so is one from Documents/")
    func uploadFromTemporaryDirectory() throws {
        _ = try DaemonUnderTest.start(container)
        server.acceptUploads(at: "/inbox")
        let application = BackgroundApplication.shared
        #expect(application.temporaryDirectory.path == container.layout.privateContainer(InProcess.app.bundleIdentifier).appendingPathComponent("tmp").path)
        let delegate = RecordingDelegate()
        let session = fixture.session("tmp-upload", delegate: delegate)
        var tasks: [URLSessionTask] = []
        for folder in [application.temporaryDirectory, application.documentsDirectory] {
            let file = folder.appendingPathComponent("note.txt")
            try Data("from \(folder.lastPathComponent)".utf8).write(to: file)
            var request = URLRequest(url: server.url(for: "/inbox"))
            request.httpMethod = "PUT"
            let task = session.uploadTask(with: request, fromFile: file)
            task.resume()
            tasks.append(task)
        }
        for task in tasks {
            #expect(delegate.wait { if case .completed(task.taskIdentifier, nil, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        }
        #expect(server.receivedUploads(at: "/inbox").count == 2)
        session.invalidateAndCancel()
    }

    @Test("Apple's API where iOS code expects it: URLSession.shared and default sessions with completion handlers and async, getTasksWithCompletionHandler, async tasks, URLError's resume data and cancelled reason")
    func appleAPIs() async throws {
        _ = try DaemonUnderTest.start(container)
        let payload = testPayload(size: 256 << 10, seed: 3)
        server.serve("/apple.bin", data: payload)
        let url = server.url(for: "/apple.bin")

        let viaShared = Locked<(Data?, Int?, Error?)?>(nil)
        URLSession.shared.dataTask(with: url) { data, response, error in
            viaShared.withLock { $0 = (data, (response as? HTTPURLResponse)?.statusCode, error) }
        }.resume()
        #expect(waitUntil(timeout: 20) { viaShared.withLock { $0 } != nil })
        #expect(viaShared.withLock { $0?.0 } == payload)
        #expect(viaShared.withLock { $0?.1 } == 200)

        let session = URLSession(configuration: .default)
        let (data, response) = try await session.data(from: url)
        #expect(data == payload)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let (file, _) = try await session.download(from: url)
        #expect(try Data(contentsOf: file) == payload, "the file is the caller's")
        try FileManager.default.removeItem(at: file)
        let located = Locked<Bool?>(nil)
        session.downloadTask(with: url) { location, _, _ in
            located.withLock { $0 = location.map { FileManager.default.fileExists(atPath: $0.path) } ?? false }
        }.resume()
        #expect(waitUntil(timeout: 20) { located.withLock { $0 } != nil })
        #expect(located.withLock { $0 } == true, "the file exists during the handler")

        let dataDelegate = RecordingDelegate()
        let withDelegate = URLSession(configuration: .default, delegate: dataDelegate, delegateQueue: nil)
        let dataTask = withDelegate.dataTask(with: url)
        dataTask.resume()
        #expect(dataDelegate.wait { $0 == .completed(task: dataTask.taskIdentifier, code: nil, status: 200) }, "\(dataDelegate.calls)")
        #expect(dataDelegate.receivedBodies[dataTask.taskIdentifier] == payload, "didReceive data, then didCompleteWithError")
        withDelegate.invalidateAndCancel()

        let configuration = URLSessionConfiguration.background(withIdentifier: "apple")
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        configuration.shouldUseExtendedBackgroundIdleMode = true
        let created = CreationRecorder()
        let background = URLSession(configuration: configuration, delegate: created, delegateQueue: nil)
        let download = background.downloadTask(with: url)
        let upload = try {
            let file = container.layout.appGroup(InProcess.group).appendingPathComponent("apple-upload.bin")
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data("up".utf8).write(to: file)
            var request = URLRequest(url: server.url(for: "/up"))
            request.httpMethod = "PUT"
            return background.uploadTask(with: request, fromFile: file)
        }()
        let grouped = Locked<(Int, Int, Int)?>(nil)
        background.getTasksWithCompletionHandler { data, uploads, downloads in
            grouped.withLock { $0 = (data.count, uploads.map(\.taskIdentifier).first ?? -1, downloads.map(\.taskIdentifier).first ?? -1) }
        }
        #expect(waitUntil(timeout: 10) { grouped.withLock { $0 } != nil })
        #expect(grouped.withLock { $0 }.map { [$0.0, $0.1, $0.2] } == [0, upload.taskIdentifier, download.taskIdentifier])
        let (dataTasks, uploadTasks, downloadTasks) = await background.tasks
        #expect(dataTasks.isEmpty && uploadTasks.count == 1 && downloadTasks.count == 1)
        #expect(waitUntil(timeout: 5) { created.identifiers.withLock { $0 } == [download.taskIdentifier, upload.taskIdentifier] }, "didCreateTask for each task, in order")
        background.invalidateAndCancel()

        let error = URLError(.cancelled, userInfo: [NSURLSessionDownloadTaskResumeData: Data([1, 2]), NSURLErrorBackgroundTaskCancelledReasonKey: 0])
        #expect(error.downloadTaskResumeData == Data([1, 2]))
        #expect(error.uploadTaskResumeData == nil)
        #expect(error.backgroundTaskCancelledReason == .userForceQuitApplication)
    }
}
}

/// Records `urlSession(_:didCreateTask:)`.
final class CreationRecorder: URLSessionTaskDelegate, @unchecked Sendable {
    let identifiers = Locked<[Int]>([])
    func urlSession(_ session: URLSession, didCreateTask task: URLSessionTask) {
        identifiers.withLock { $0.append(task.taskIdentifier) }
    }
}

/// The same, with real processes: the stand-ins and the daemon.
@Suite(.timeLimit(.minutes(20)))
struct AdoptionProcessTests {
    @Test("A stand-in that cannot start transferd exits non-zero and names the daemon (issue 18, finding 1)")
    func standInWithoutDaemonFails() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/never", data: Data("never".utf8))
        let fetch = try Executable.fetchExtension.start(["download", server.url(for: "/never").absoluteString], in: container, environment: ["BGTRANSFER_TRANSFERD": "/nonexistent/bin/transferd"])
        let outcome = fetch.wait(timeout: 60)
        #expect(outcome.status != nil && outcome.status != 0, "status \(String(describing: outcome.status)), stdout \(outcome.stdout)")
        #expect(outcome.stderr.contains("/nonexistent/bin/transferd"), "stderr names the daemon: \(outcome.stderr)")
        #expect(!outcome.stdout.split(separator: "\n").contains("1"), "no task identifier is printed: \(outcome.stdout)")
        #expect(!server.waitForRequests(count: 1, timeout: 0.5))
    }

    @Test("finishTasksAndInvalidate and invalidateAndCancel: the events are acknowledged and the app is not relaunched for an empty batch (issue 18, finding 4)")
    func noRelaunchAfterInvalidation() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/small", data: Data("small".utf8))
        var slow = RouteOptions()
        slow.bytesPerSecond = 64 << 10
        server.serve("/slow", data: testPayload(size: 4 << 20), options: slow)
        // A daemon that exits once idle: it is not idle while a relaunch is due (events waiting
        // for an app it would launch), so its exit is the event that says none will come.
        let daemon = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--exit-when-idle", "3"])

        let finish = try Executable.hostApp.run(["download", server.url(for: "/small").absoluteString, "--invalidate", "finish"], in: container)
        #expect(finish.status == 0, "stdout \(finish.stdout) stderr \(finish.stderr)")
        #expect(finish.stdout.contains("didBecomeInvalidWithError: nil"), "\(finish.stdout)")
        let cancel = try Executable.hostApp.run(["download", server.url(for: "/slow").absoluteString, "--invalidate", "cancel"], in: container)
        #expect(cancel.status == 0, "stdout \(cancel.stdout) stderr \(cancel.stderr)")
        #expect(cancel.stdout.contains("failed: cancelled (-999)"), "\(cancel.stdout)")

        let session = "com.example.host.background"
        #expect(waitUntil(timeout: 5) { container.pendingEvents(session).isEmpty }, "events left: \(container.pendingEvents(session))")
        // Whichever daemon serves the container (one started on demand exits after 30 s idle).
        #expect(waitUntil(timeout: 60) { !daemon.process.isRunning && !FileLock.isHeld(container.layout.daemonLock.path) }, "the daemon did not go idle")
        let refusals = TransferLog.entries(layout: container.layout).filter { $0.failedRequestCode == TransferFailure.requestRefused }
        #expect(refusals.isEmpty, "\(refusals.map(\.message))")
        let relaunches = container.logEntries(process: "transferd").filter { $0.launched() != nil }
        #expect(relaunches.isEmpty, "relaunched for nothing: \(relaunches.map(\.message))")
        let host = ContainerSnapshot.read(container.layout).apps.first { $0.bundleIdentifier == "com.example.host" }
        #expect(host?.relaunchDelay == nil, "the rate limiter did not start")
    }
}
