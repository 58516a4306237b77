import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import ContainerInspection

/// Suspended tasks across a crash (S4.3), the resource timeout (S6.2, S6.4) and disk trouble.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class DurabilityTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    @Test("Suspended tasks stay suspended across a daemon crash; the session reattaches by itself (S4.3, S1.7)")
    func suspendedAcrossCrash() throws {
        let daemon = try DaemonUnderTest.start(container)
        var slow = RouteOptions()
        slow.bytesPerSecond = 512 << 10
        server.serve("/held.bin", data: testPayload(size: 4 << 20), options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("suspended", delegate: delegate)
        let never = session.downloadTask(with: server.url(for: "/held.bin"))
        let paused = session.downloadTask(with: server.url(for: "/held.bin"))
        paused.resume()
        #expect(server.waitForRequests(count: 1, timeout: 10))
        paused.suspend()
        #expect(paused.state == .suspended)

        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
        let requestsBefore = server.requests.count
        _ = try DaemonUnderTest.start(container)
        #expect(container.waitForLog { $0.isReattached } != nil, "the library reopened its session in the new daemon")

        let tasks = try #require(allTasks(session))
        #expect(tasks.map(\.taskIdentifier).sorted() == [never.taskIdentifier, paused.taskIdentifier])
        #expect(tasks.allSatisfy { $0.state == .suspended }, "\(tasks.map(\.state))")
        #expect(!server.waitForRequests(count: requestsBefore + 1, timeout: 0.5), "suspended tasks make no traffic after the restart")

        server.serve("/held.bin", data: testPayload(size: 4 << 20))
        paused.resume()
        // 206 if bytes were on disk at the suspend, 200 if the suspend came before the first byte.
        #expect(delegate.wait { if case .completed(paused.taskIdentifier, nil, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        session.invalidateAndCancel()
    }

    @Test("downloadTask(with:) returns before the daemon has the task; a daemon killed meanwhile loses none: each is created once, with the identifier the app saw, and flush calls back once all are durable")
    func pipelinedCreationAcrossCrash() throws {
        let daemon = try DaemonUnderTest.start(container)
        let session = fixture.session("pipelined", delegate: RecordingDelegate())
        let urls = (0..<300).map { server.url(for: "/queued/\($0).bin") }
        var created: [Int: String] = [:]
        for url in urls {
            let task = session.downloadTask(with: url)
            created[task.taskIdentifier] = url.absoluteString
        }
        #expect(created.count == 300, "every task got its own identifier at once")
        daemon.process.kill() // most likely with creations still in flight
        _ = daemon.process.wait(timeout: 10)
        _ = try DaemonUnderTest.start(container)
        #expect(container.waitForLog { $0.isReattached } != nil)

        let flushed = DispatchSemaphore(value: 0)
        session.flush { flushed.signal() }
        #expect(flushed.wait(timeout: .now() + 20) == .success, "flush called back")
        let onDisk = ContainerSnapshot.read(container.layout, sessionFilter: "pipelined").sessions.first?.tasks ?? []
        #expect(onDisk.count == 300, "each task once")
        #expect(Dictionary(uniqueKeysWithValues: onDisk.map { ($0.taskIdentifier, $0.originalRequest.url) }) == created)
        #expect(allTasks(session)?.map(\.taskIdentifier) == created.keys.sorted())
        session.invalidateAndCancel()
    }

    @Test("When timeoutIntervalForResource is spent the task fails with -1001 and resume data (S6.2, S6.4)")
    func resourceTimeout() throws {
        _ = try DaemonUnderTest.start(container)
        var slow = RouteOptions()
        slow.bytesPerSecond = 256 << 10
        server.serve("/forever.bin", data: testPayload(size: 8 << 20), options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("budget", delegate: delegate) { $0.timeoutIntervalForResource = 1.5 }
        let task = session.downloadTask(with: server.url(for: "/forever.bin"))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -1001, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        let error = delegate.errors[task.taskIdentifier] as NSError?
        #expect(error?.userInfo[NSURLSessionDownloadTaskResumeData] is Data, "a resumable download carries resume data")
        session.invalidateAndCancel()
    }

    @Test("A full disk fails the task with -3003 and a clear message; the daemon and the next task go on")
    func diskFull() throws {
        _ = try DaemonUnderTest.start(container, fileSizeLimit: 3 << 20)
        server.serve("/too-big.bin", data: testPayload(size: 6 << 20))
        server.serve("/small.bin", data: testPayload(size: 256 << 10))
        let delegate = RecordingDelegate()
        let session = fixture.session("diskfull", delegate: delegate)
        let big = session.downloadTask(with: server.url(for: "/too-big.bin"))
        big.resume()
        #expect(delegate.wait { if case .completed(big.taskIdentifier, NSURLErrorCannotWriteToFile, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.errors[big.taskIdentifier]?.localizedDescription.contains("cannot write the download") == true)
        let small = session.downloadTask(with: server.url(for: "/small.bin"))
        small.resume()
        #expect(delegate.wait { $0 == .completed(task: small.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        session.invalidateAndCancel()
    }

    @Test("An unusable downloads folder fails the task with -3000 naming the path")
    func cannotCreateFile() throws {
        _ = try DaemonUnderTest.start(container)
        server.serve("/nowhere.bin", data: Data("x".utf8))
        // A plain file where the session's downloads folder must go.
        let caches = container.layout.appGroup(InProcess.group).appendingPathComponent("Library/Caches/BackgroundTransfer")
        try FileManager.default.createDirectory(at: caches, withIntermediateDirectories: true)
        try Data("in the way".utf8).write(to: caches.appendingPathComponent("blocked"))
        let delegate = RecordingDelegate()
        let session = fixture.session("blocked", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/nowhere.bin"))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -3000, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.errors[task.taskIdentifier]?.localizedDescription.contains("blocked") == true, "\(String(describing: delegate.errors[task.taskIdentifier]))")
        session.invalidateAndCancel()
    }
}
}
