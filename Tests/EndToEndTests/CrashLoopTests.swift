import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer
import ContainerInspection
import TransferCoding
import TransferLogging
import TransferPOSIX

/// No input puts the container's daemon into a crash loop, and no download fills its disk
/// (issue "hostile servers, hostile peers, hostile records").
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class CrashLoopTests: InProcessSuite, @unchecked Sendable {
    override class var startsDaemon: Bool { false }

    @Test("A daemon that crashes twice on the same task fails that task with an error saying so at its next start, and then stays up")
    func crashOnTheSameTaskTwice() throws {
        // Each daemon this test starts crashes on a response carrying the header, as on a
        // device where every restart meets the same server. Only this route sends it.
        let fault = ["--relaunch-delay", "0.1", "--fault-crash-on-response-header", "X-Crash-Daemon"]
        var options = RouteOptions()
        options.extraHeaders = [("X-Crash-Daemon", "1")]
        server.serve("/crash", data: Data("boom".utf8), options: options)
        server.serve("/healthy.bin", data: testPayload(size: 32 << 10, seed: 3))

        // The host starts the download, to begin two seconds later, and exits: it is gone at
        // the first crash, so that no daemon it would start on demand (which takes no test
        // hook from a client) takes over.
        _ = try DaemonUnderTest.start(container, extraArguments: fault)
        let created = try Executable.hostApp.start(["download", server.url(for: "/crash").absoluteString, "--begin-after", "2"], in: container).wait(timeout: 60)
        try #require(created.status == 0, "\(created.stderr)")
        // Whenever no daemon runs, one is started (by this test, or by the host on demand): the
        // second retries the task once and crashes; the third fails it before a third try, and
        // the host, launched for the event, hears why.
        var failed: LogEntry?
        let deadline = Date().addingTimeInterval(90)
        while failed == nil && Date() < deadline {
            if container.processesNamingContainer(executable: "transferd").isEmpty { _ = try? DaemonUnderTest.start(container, extraArguments: fault) }
            failed = container.waitForLog(timeout: 0.2) { $0.process == "host-app" && $0.message.contains("task 1 failed") }
        }
        #expect(failed?.message.contains("crashed 2 times") == true, "\(String(describing: failed?.message))")
        #expect(server.requests.filter { $0.path == "/crash" }.count == 2, "tried once per crash, not a third time")
        #expect(container.logEntries(process: "transferd", category: "daemon").filter { $0.message.contains("crashed while working on this task") }.count == 1)
        #expect(container.crashReports().count >= 1, "the daemons trapped (their output says so)")

        // The daemon is up and serves other work (once the host launched for the failed task's
        // event has let go of the session).
        #expect(container.waitUntilSessionIsFree("com.example.host.background"), "the relaunched host still holds the session")
        let healthy = try Executable.hostApp.run(["download", server.url(for: "/healthy.bin").absoluteString, "--wait"], in: container)
        #expect(healthy.status == 0, "\(healthy.stderr)")
        #expect(container.processesNamingContainer(executable: "transferd").count == 1)
    }

    @Test("A download that would leave less than the reserve free stops with -3003 and resume data, instead of filling the disk")
    func freeSpaceFloor() throws {
        // A body of unknown length, 1 GiB of zeros from a sparse file, throttled by nothing.
        let endless = container.parent.appendingPathComponent("endless.bin")
        #expect(FileManager.default.createFile(atPath: endless.path, contents: nil))
        let handle = try FileHandle(forWritingTo: endless)
        try handle.truncate(atOffset: 1 << 30)
        try handle.close()
        var options = RouteOptions()
        options.omitContentLength = true
        server.serve("/endless", file: endless, options: options)

        // A reserve that leaves this download about 256 MiB of the file system's free space
        // (other tests write and remove files meanwhile: the margin is wide).
        var stats = statvfs()
        try #require(statvfs(container.root, &stats) == 0)
        let free = Int64(stats.f_bavail) * Int64(stats.f_frsize)
        let reserve = max(1, (free - (256 << 20)) >> 20)
        let daemon = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--free-space-reserve", "\(reserve)"])

        let delegate = RecordingDelegate()
        let session = fixture.session("floor", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/endless"))
        task.resume()
        #expect(delegate.wait(timeout: 60) { if case .completed(task.taskIdentifier, NSURLErrorCannotWriteToFile, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        let error = delegate.errors[task.taskIdentifier] as NSError?
        let resumeData = error?.userInfo[NSURLSessionDownloadTaskResumeData] as? Data
        #expect(resumeData != nil, "the bytes written stay as resume data (S6.2): \(String(describing: error))")
        let received = (resumeData.flatMap { try? PropertyListSerialization.propertyList(from: $0, format: nil) as? [String: Any] })?["NSURLSessionResumeBytesReceived"] as? Int64 ?? 0
        #expect(received > 0 && received < 640 << 20, "stopped near the reserve, not at the end of the body: \(received) bytes")
        #expect(statvfs(container.root, &stats) == 0)
        #expect(ProcessSpawner.isAlive(daemon.pid))
        session.invalidateAndCancel()
    }

    @Test("Journal lines with Int.max task identifiers, UInt64.max event numbers and acknowledgements are set aside: the daemon and inspect start, good tasks stay")
    func boundaryJournalLines() throws {
        var daemon = try DaemonUnderTest.start(container)
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/kept"], in: container)
        try #require(created.status == 0, "\(created.stderr)")
        let good = try #require(ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks).first)
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)

        let journalPath = JournalContents.path(inSession: container.sessionDirectory("com.example.host.background"))
        var lines: [JournalLine] = [.acknowledged(through: .max), .acknowledged(through: UInt64(Int64.max) + 1),
                                    .counters(JournalCounters(nextTaskIdentifier: .max, nextEventNumber: .max)),
                                    .counters(JournalCounters(nextTaskIdentifier: .min, nextEventNumber: 0))]
        for identifier in [Int.max, Int.min, -1, 0, Int(Int32.max) + 1] {
            var task = good
            task.taskIdentifier = identifier
            lines.append(.task(task))
        }
        for number in [UInt64.max, 0, UInt64(Int64.max) + 1] {
            lines.append(.event(EventRecord(number: number, kind: .taskCompleted, task: good, downloadedFile: nil, error: nil)))
        }
        var counted = good
        counted.taskIdentifier = good.taskIdentifier + 100
        counted.revision = .max
        counted.retryCount = .max
        counted.authenticationFailures = .max
        counted.countOfBytesReceived = .max
        counted.countOfBytesExpectedToReceive = .min
        counted.priority = 7
        lines.append(.task(counted)) // usable, with its counters brought into range
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journalPath))
        handle.seekToEndOfFile()
        for line in lines {
            handle.write(try RecordCoding.encodeCompact(line))
            handle.write(Data("\n".utf8))
        }
        try handle.close()

        let inspected = try Executable.bgtransfer.run(["inspect", "--json"], in: container)
        #expect(inspected.status == 0, "inspect reads the journal: \(inspected.stderr)")
        daemon = try DaemonUnderTest.start(container)
        let reply = try DaemonEndpoint.request(.ping, layout: container.layout, timeout: 20)
        if case .ok = reply {} else { Issue.record("ping answered \(reply)") }
        let journal = try JournalContents.read(journalPath)
        #expect(journal.tasks[good.taskIdentifier] != nil, "the good task is kept")
        #expect(journal.tasks[counted.taskIdentifier].map { $0.revision < Int.max && $0.retryCount < Int.max && $0.priority == 1 } == true)
        let corrupt = (try? String(contentsOf: container.sessionDirectory("com.example.host.background").appendingPathComponent("journal.corrupt"), encoding: .utf8)) ?? ""
        #expect(corrupt.split(separator: "\n").count == lines.count - 1, "every line out of range was set aside: \(corrupt)")

        // The session goes on numbering from where it was.
        let next = try Executable.hostApp.run(["download", "http://127.0.0.1:9/next"], in: container)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(ProcessSpawner.isAlive(daemon.pid))
    }
}
}
