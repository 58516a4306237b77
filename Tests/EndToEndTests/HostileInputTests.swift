import Foundation
import Testing
import TransferContainer
import ContainerInspection
import TransferCoding
import TransferPOSIX

/// Garbage on the daemon's socket does no harm (issue "hostile input"): the daemon keeps
/// serving, and every task it had accepted stays intact.
@Suite(.timeLimit(.minutes(20)))
struct HostileInputTests {
    @Test("100,000 random and mutated frames, oversized lengths, mid-frame hang-ups and 2,000 idle connections: the daemon still answers and keeps its tasks")
    func socketFuzz() throws {
        let seed = replayableSeed("BGTRANSFER_FUZZ_SEED", label: "socket fuzz")
        var random = SeededRandom(seed: seed)
        let container = try TestContainer()
        defer { container.tearDown() }
        let daemon = try DaemonUnderTest.start(container)

        // An accepted task that must survive: it retries against a port nobody listens on.
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/never", "--description", "survivor"], in: container)
        try #require(created.status == 0, "\(created.stderr)")
        let before = ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks)
        try #require(before.count == 1)

        // Valid frames to mutate.
        let hello = ClientHello(identity: testIdentity("com.example.fuzz"), executablePath: "/nonexistent", processName: "fuzz", isForeground: true)
        let samples: [Data] = try [
            Frame.encode(RequestFrame(id: 1, request: .hello(hello))),
            Frame.encode(RequestFrame(id: 2, request: .openSession(identifier: try SessionIdentifier("fuzz"), configuration: SessionConfiguration(), launchedForEvents: false))),
            Frame.encode(RequestFrame(id: 3, request: .createTask(session: try SessionIdentifier("fuzz"), TaskCreation(kind: .download, request: RequestRecord(url: "file:///etc/passwd"))))),
            Frame.encode(RequestFrame(id: 4, request: .acknowledge(session: try SessionIdentifier("com.example.host.background"), through: 99))),
            Frame.encode(RequestFrame(id: 5, request: .cancelTask(session: try SessionIdentifier("com.example.host.background"), task: 1, produceResumeData: true))),
        ]

        var sent = 0
        var connectionsUsed = 0
        var connection: FileDescriptor?
        func socket() throws -> FileDescriptor {
            if let connection { return connection }
            let fd = try UnixSocket.connect(to: container.layout.daemonSocket.path)
            fd.setNonBlocking()
            connection = fd
            connectionsUsed += 1
            return fd
        }
        func drop() {
            connection?.close()
            connection = nil
        }
        var drain = [UInt8](repeating: 0, count: 65_536)
        while sent < 100_000 {
            let fd = try socket()
            var frame: Data
            switch random.next(below: 10) {
            case 0...3: // random bytes behind a plausible length
                let length = Int(random.next(below: 512))
                frame = Data(withUnsafeBytes(of: UInt32(length).bigEndian) { Array($0) })
                frame.append(contentsOf: (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            case 4...7: // a valid frame with a few bytes of its JSON changed
                frame = samples[Int(random.next(below: UInt64(samples.count)))]
                for _ in 0..<Int(1 + random.next(below: 4)) where frame.count > 4 {
                    frame[4 + Int(random.next(below: UInt64(frame.count - 4)))] = UInt8(truncatingIfNeeded: random.next())
                }
            case 8: // an oversized length prefix: the daemon must cut us off, not buffer
                frame = Data(withUnsafeBytes(of: UInt32(Frame.maximumSize + 1 + Int(random.next(below: 1 << 20))).bigEndian) { Array($0) })
            default: // half a frame, then hang up
                let whole = samples[Int(random.next(below: UInt64(samples.count)))]
                frame = whole.prefix(Int(random.next(below: UInt64(whole.count))))
            }
            let written = frame.withUnsafeBytes { send(fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            _ = drain.withUnsafeMutableBytes { recv(fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            sent += 1
            if written < 0 || random.next(below: 50) == 0 || frame.count >= 4 && frame.prefix(4) == Data(withUnsafeBytes(of: UInt32(Frame.maximumSize + 1).bigEndian) { Array($0) }) {
                drop()
            }
            if sent % 10 == 0 && random.chance(0.2) { drop() } // hang up mid-stream
        }
        drop()

        // Thousands of connections opened and left idle.
        var idle: [FileDescriptor] = []
        for _ in 0..<2_000 {
            if let fd = try? UnixSocket.connect(to: container.layout.daemonSocket.path) { idle.append(fd) }
        }
        defer { idle.forEach { $0.close() } }
        print("socket fuzz seed \(seed): \(sent) frames over \(connectionsUsed) connections, then \(idle.count) idle connections")

        // The daemon still answers a normal request, and its task is intact.
        let reply = try DaemonEndpoint.request(.ping, layout: container.layout, timeout: 20)
        if case .ok = reply {} else { Issue.record("ping answered \(reply)") }
        #expect(ProcessSpawner.isAlive(daemon.pid), "the daemon survived")
        let after = ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks)
        #expect(after.map(\.taskIdentifier) == before.map(\.taskIdentifier))
        #expect(after.first?.taskDescription == "survivor")
        #expect(after.first?.originalRequest == before.first?.originalRequest)
        // A normal client is served too.
        let launch = try Executable.hostApp.run([], in: container)
        #expect(launch.status == 0, "\(launch.stderr)")
        #expect(launch.stdout.contains("task 1 running http://127.0.0.1:9/never"), "\(launch.stdout)")
    }
}

extension HostileInputTests {
    @Test("1,000 corrupted, truncated and unknown-version journal lines: the daemon sets them aside and keeps every good task")
    func corruptedRecords() throws {
        let seed = replayableSeed("BGTRANSFER_FUZZ_SEED", label: "record fuzz")
        var random = SeededRandom(seed: seed)
        let container = try TestContainer()
        defer { container.tearDown() }
        let daemon = try DaemonUnderTest.start(container)
        for index in 1...3 {
            let outcome = try Executable.hostApp.run(["download", "http://127.0.0.1:9/kept-\(index)"], in: container)
            try #require(outcome.status == 0, "\(outcome.stderr)")
        }
        let good = ContainerSnapshot.read(container.layout).sessions.flatMap(\.tasks)
        try #require(good.count == 3)
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)

        // 1,000 bad lines appended to the session's journal, each about a task of its own
        // (1,000 and up), so that a harmless mutation that still reads cannot touch a good task.
        let session = container.sessionDirectory("com.example.host.background")
        let journalPath = JournalContents.path(inSession: session)
        let encoder = RecordCoding.encoder(pretty: false)
        var bad = Data()
        for index in 0..<1_000 {
            var task = good[0]
            task.taskIdentifier = 1_000 + index
            let sample = try encoder.encode(JournalLine.task(task))
            let identifierRange = try #require(String(decoding: sample, as: UTF8.self).range(of: "\"taskIdentifier\":\(task.taskIdentifier)")).upperBound.utf16Offset(in: String(decoding: sample, as: UTF8.self))
            var bytes: Data
            switch random.next(below: 4) {
            case 0: bytes = Data((0..<Int(random.next(below: 300))).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            case 1: bytes = sample.prefix(Int(random.next(below: UInt64(sample.count))))
            case 2: bytes = Data(String(decoding: sample, as: UTF8.self).replacingOccurrences(of: "\"version\":1", with: "\"version\":99").utf8)
            default:
                bytes = sample
                for _ in 0..<3 {
                    let position = Int(random.next(below: UInt64(bytes.count)))
                    if position < identifierRange && position > identifierRange - 25 { continue } // keep the task's identifier
                    bytes[position] = UInt8(truncatingIfNeeded: random.next())
                }
            }
            bytes = Data(bytes.map { $0 == UInt8(ascii: "\n") ? UInt8(ascii: " ") : $0 }) // one line each
            if bytes.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { bytes.append(UInt8(ascii: "?")) } // blank lines are skipped
            bad.append(bytes)
            bad.append(UInt8(ascii: "\n"))
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journalPath))
        handle.seekToEndOfFile()
        handle.write(bad)
        try handle.close()

        _ = try DaemonUnderTest.start(container)
        let reply = try DaemonEndpoint.request(.ping, layout: container.layout, timeout: 20)
        if case .ok = reply {} else { Issue.record("ping answered \(reply)") }
        // Counted before the host is launched, which would take the events of kept tasks that ended.
        let journal = try JournalContents.read(session: session)
        // A kept line is a task of its own: still queued, or ended by the daemon since.
        let loadedAnyway = Set(journal.tasks.keys).union(journal.events.values.map(\.task.taskIdentifier)).filter { $0 >= 1_000 }.count
        let launch = try Executable.hostApp.run([], in: container)
        #expect(launch.status == 0, "\(launch.stderr)")
        for task in good {
            #expect(launch.stdout.contains("task \(task.taskIdentifier) running \(task.originalRequest.url)"), "\(launch.stdout)")
        }
        let corrupt = (try? Data(contentsOf: session.appendingPathComponent("journal.corrupt"))) ?? Data()
        let setAside = corrupt.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).count - 1
        print("record fuzz seed \(seed): 1000 bad journal lines, \(setAside) set aside in journal.corrupt, \(loadedAnyway) still readable and kept")
        #expect(setAside + loadedAnyway == 1_000, "every bad line was either set aside or (a harmless mutation) kept")
        #expect(ContainerSnapshot.read(container.layout).sessions.flatMap(\.unreadableRecords).isEmpty, "the journal was rewritten without the bad lines")
        #expect(container.logEntries(process: "transferd", category: "store").contains { $0.message.contains("cannot be used") })
    }
}
