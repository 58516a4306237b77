import Foundation
import Testing
import LoopbackServer
import TransferContainer
import StandInSupport
import TestPeers
import TransferCoding
import TransferLogging
import TransferPOSIX

/// One app must not take the daemon from the others (issue 28, items 1–3): descriptors held
/// per session, a session too big to open, partial frames after a hello. Real daemon under a
/// real `RLIMIT_NOFILE`, real client processes, raw sockets for the hostile peer; every
/// process ended by its pid, every wait bounded. Each runs on a thread of its own
/// (`onOwnThread`): they block for minutes, and must not hold a cooperative thread meanwhile.
@Suite(.timeLimit(.minutes(20)))
struct DaemonLimitsTests {
    static let appIdentity = testIdentity("com.example.tests")

    /// The descriptors a process holds now (`/proc/<pid>/fd`).
    static func openDescriptors(of pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd"))?.count ?? -1
    }

    /// A raw client of the test app, welcomed.
    /// Waits up to 100 ms for any of `clients`' sockets to take more bytes (the daemon read some).
    static func waitUntilWritable(_ clients: [RawClient]) {
        SocketBacklog.waitUntilWritable(clients.map(\.fd))
    }

    /// Bytes this client sent that the daemon has not read yet (`SIOCOUTQ`).
    static func unreadBytes(_ client: RawClient) -> Int32 {
        SocketBacklog.unreadBytes(client.fd)
    }

    static func welcomedClient(_ container: TestContainer) throws -> RawClient {
        try RawClient.welcomed(container, as: appIdentity)
    }

    @Test("One app opening sessions past its cap under a limit of 160 open files: the extra one is refused naming the app and the cap, the daemon holds no descriptor per session, another app's download and bgtransfer conditions work, and a daemon restarted under the same limit starts")
    func sessionsDoNotHoldDescriptors() async throws { try await onOwnThread { try Self.sessionsDoNotHoldDescriptorsOnItsThread() } }

    /// Blocks for minutes on processes and sockets: on a thread of its own, not a cooperative one.
    static func sessionsDoNotHoldDescriptorsOnItsThread() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/small.bin", data: testPayload(size: 64 << 10))
        let limit = 160
        let arguments = ["--relaunch-delay", "0.1", "--max-transfers", "4"]
        var daemon = try DaemonUnderTest.start(container, extraArguments: arguments, openFileLimit: limit)
        defer { daemon.process.kill() }
        let idle = Self.openDescriptors(of: daemon.pid)

        let app = try Self.welcomedClient(container)
        defer { app.close() }
        var configuration = SessionConfiguration()
        configuration.sessionSendsLaunchEvents = false
        var opened = 0
        var refusal: TransferFailure?
        for index in 1...1_100 {
            let reply = try app.request(.openSession(identifier: try SessionIdentifier("com.example.tests.s\(index)"), configuration: configuration, launchedForEvents: false), timeout: 20)
            switch reply {
            case .sessionOpened: opened += 1
            case .failure(let failure): refusal = failure
            default: throw TestFailure("openSession \(index) answered \(reply)")
            }
            if refusal != nil { break }
        }
        let held = Self.openDescriptors(of: daemon.pid)
        print("one app opening sessions under a limit of \(limit) open files: \(opened) opened, then \(refusal.map { "\($0.code) \($0.message)" } ?? "none refused"); daemon descriptors \(idle) idle, \(held) with them open")
        #expect(opened == 1_024, "every session up to the cap opens (\(opened))")
        #expect(refusal?.code == -1011, "the one past the cap is refused with -1011: \(String(describing: refusal))")
        #expect(refusal?.message.contains("com.example.tests") == true && refusal?.message.contains("1024") == true, "naming the app and the cap: \(String(describing: refusal))")
        #expect(held - idle < 16, "the daemon holds no descriptor per session: \(idle) idle, \(held) with \(opened) sessions open")

        // Another app, and the developer's tool, are served.
        let download = try Executable.hostApp.run(["download", server.url(for: "/small.bin").absoluteString, "--wait"], in: container, timeout: 60)
        #expect(download.status == 0, "another app's download completes: \(download.stderr)")
        let conditions = try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container, timeout: 30)
        #expect(conditions.status == 0, "bgtransfer conditions reaches the daemon: \(conditions.stderr)")

        // The sessions are on disk: a daemon under the same limit starts and serves.
        app.close()
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)
        daemon = try DaemonUnderTest.start(container, extraArguments: arguments, openFileLimit: limit)
        let restarted = Self.openDescriptors(of: daemon.pid)
        print("restarted with \(opened) sessions on disk under a limit of \(limit): \(restarted) descriptors")
        let again = try Executable.hostApp.run(["download", server.url(for: "/small.bin").absoluteString, "--wait"], in: container, timeout: 60)
        #expect(again.status == 0, "after the restart, a download completes: \(again.stderr)")
        let reopened = try Self.welcomedClient(container)
        defer { reopened.close() }
        let reply = try reopened.request(.openSession(identifier: try SessionIdentifier("com.example.tests.s7"), configuration: configuration, launchedForEvents: false))
        #expect({ if case .sessionOpened = reply { true } else { false } }(), "a session on disk opens again: \(reply)")
    }

    @Test("A session of 120,001 queued tasks opens in a real host-app launch, every task listed")
    func bigSessionOpens() async throws { try await onOwnThread { try Self.bigSessionOpensOnItsThread() } }

    /// Blocks for minutes on processes and sockets: on a thread of its own, not a cooperative one.
    static func bigSessionOpensOnItsThread() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        var daemon = try DaemonUnderTest.start(container)
        defer { daemon.process.kill() }
        let created = try Executable.hostApp.run(["download", "http://127.0.0.1:9/first"], in: container)
        try #require(created.status == 0, "\(created.stderr)")
        daemon.process.kill()
        _ = daemon.process.wait(timeout: 10)

        // 120,000 suspended downloads appended to the host's journal, as the daemon writes them.
        let extra = 120_000
        let template = String(decoding: try RecordCoding.encodeCompact(JournalLine.task(TaskRecord(taskIdentifier: 999_999_999, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/q/999999999.bin")))), as: UTF8.self)
        try #require(template.components(separatedBy: "999999999").count == 3, "the template names its number twice: \(template)")
        let parts = template.components(separatedBy: "999999999")
        var lines = ""
        lines.reserveCapacity(extra * (template.count + 8))
        for number in 1_000...(1_000 + extra - 1) {
            lines += parts[0] + String(number) + parts[1] + String(number) + parts[2] + "\n"
        }
        let journal = URL(fileURLWithPath: JournalContents.path(inSession: container.sessionDirectory("com.example.host.background")))
        let handle = try FileHandle(forWritingTo: journal)
        handle.seekToEndOfFile()
        handle.write(Data(lines.utf8))
        try handle.close()

        let loading = Date()
        // A debug daemon decodes 120,001 records in under a minute on a quiet machine, in minutes
        // on a loaded one (more than 120 s beside two CPU hogs and two builds).
        daemon = try DaemonUnderTest.start(container, readyWithin: 360)
        let loaded = Date().timeIntervalSince(loading)
        let started = Date()
        // A debug build takes minutes to decode and encode 120,000 records; a release build, seconds.
        let launch = try Executable.hostApp.run([], in: container, timeout: 420)
        let elapsed = Date().timeIntervalSince(started)
        let listed = launch.stdout.split(separator: "\n").filter { $0.hasPrefix("  task ") }.count
        print("daemon start with \(extra + 1) tasks: \(String(format: "%.1f", loaded)) s (debug build); a user launch of host-app with \(extra + 1) tasks in its session: status \(String(describing: launch.status)) in \(String(format: "%.1f", elapsed)) s, \(listed) tasks listed; daemon RSS \(residentBytes(of: daemon.pid) >> 20) MiB")
        let errors = TransferLog.entries(layout: container.layout).filter { $0.level >= .error }.suffix(5).map { "\($0.process): \($0.message)" }
        #expect(launch.status == 0, "the session opens: \(launch.stderr.suffix(2_000)) \(errors)")
        #expect(launch.stdout.contains("session com.example.host.background: \(extra + 1) unfinished tasks"), "\(launch.stdout.prefix(300))")
        #expect(listed == extra + 1, "every task is listed (\(listed))")
    }

    @Test("""
        A trickler sending one byte of a frame every 3 s is cut with -1001 by the 10 s deadline \
        counted from the frame's first byte, not from its latest
        """)
    func tricklerIsCutFromTheFramesFirstByte() async throws {
        try await onOwnThread { try Self.tricklerIsCutOnItsThread() }
    }

    static func tricklerIsCutOnItsThread() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let daemon = try DaemonUnderTest.start(container)
        defer { daemon.process.kill() }
        let trickler = try Self.welcomedClient(container)
        defer { trickler.close() }

        // The frame claims 1,000 bytes; it begins with its length, then a byte at a time.
        let firstByte = Date()
        try UnixSocket.sendAll(trickler.fd, withUnsafeBytes(of: UInt32(1_000).bigEndian) { Data($0) })
        var reply: DaemonReply?
        var trickled = 0
        while reply == nil && Date().timeIntervalSince(firstByte) < 25 {
            // Waits for the daemon's word for 3 s (under its 10 s deadline), then one byte more.
            reply = trickler.reply(to: 0, timeout: 3)
            if reply == nil, !trickler.isClosedByDaemon {
                try UnixSocket.sendAll(trickler.fd, Data("{".utf8))
                trickled += 1
            }
        }
        let waited = Date().timeIntervalSince(firstByte)
        guard case .failure(let failure)? = reply else {
            Issue.record("after \(trickled) bytes over \(Int(waited)) s the trickler got \(String(describing: reply))")
            return
        }
        #expect(failure.code == TransferFailure.timedOut, "\(failure)")
        #expect(trickler.waitUntilClosed(timeout: 5), "the trickler's connection is closed")
        #expect(waited >= 10, "not before the deadline (\(waited) s)")
        #expect(waited < 14, "cut \(waited) s after the frame's first byte, \(trickled) bytes in")
    }

    @Test("400 identified connections each sending all but the last byte of a 4 MiB frame: cut off past the daemon's budget with -1103, a trickler cut after the deadline with -1001, the daemon stays small, and another app's download completes")
    func partialFramesAfterHelloAreBounded() async throws { try await onOwnThread { try Self.partialFramesAfterHelloAreBoundedOnItsThread() } }

    /// Blocks for minutes on processes and sockets: on a thread of its own, not a cooperative one.
    static func partialFramesAfterHelloAreBoundedOnItsThread() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/one.bin", data: testPayload(size: 1 << 20))
        let daemon = try DaemonUnderTest.start(container)
        defer { daemon.process.kill() }

        // A trickler: one request begun and never finished.
        let trickler = try Self.welcomedClient(container)
        defer { trickler.close() }
        try UnixSocket.sendAll(trickler.fd, withUnsafeBytes(of: UInt32(1_000).bigEndian) { Data($0) } + Data(repeating: UInt8(ascii: "{"), count: 100))
        let trickleStarted = Date()

        var clients: [RawClient] = []
        defer { clients.forEach { $0.close() } }
        for _ in 0..<400 { clients.append(try Self.welcomedClient(container)) }
        let before = residentBytes(of: daemon.pid)

        let claimed = Frame.maximumSize
        let partialLength = claimed - 1
        let header = withUnsafeBytes(of: UInt32(claimed).bigEndian) { Data($0) }
        for client in clients { _ = header.withUnsafeBytes { send(client.fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } }
        let chunk = Data(repeating: UInt8(ascii: "x"), count: 256 << 10)
        var sent = [Int](repeating: 0, count: clients.count)
        var cut = Set<Int>()
        var peak = before
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline && clients.indices.contains(where: { !cut.contains($0) && sent[$0] < partialLength }) {
            var progressed = false
            for (index, client) in clients.enumerated() where !cut.contains(index) && sent[index] < partialLength {
                let n = chunk.withUnsafeBytes { send(client.fd.rawValue, $0.baseAddress, min($0.count, partialLength - sent[index]), Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if n > 0 { sent[index] += n; progressed = true } else if n < 0 && errno != EAGAIN { cut.insert(index) }
            }
            peak = max(peak, residentBytes(of: daemon.pid))
            if !progressed { Self.waitUntilWritable(clients.indices.filter { !cut.contains($0) && sent[$0] < partialLength }.map { clients[$0] }) }
        }
        // The daemon has read what is in flight once no client socket holds unread bytes.
        let drained = Date().addingTimeInterval(10)
        while Date() < drained && clients.indices.contains(where: { !cut.contains($0) && Self.unreadBytes(clients[$0]) > 0 }) {
            peak = max(peak, residentBytes(of: daemon.pid))
            Self.waitUntilWritable(clients.indices.filter { !cut.contains($0) }.map { clients[$0] })
        }
        peak = max(peak, residentBytes(of: daemon.pid))
        let whole = sent.filter { $0 == partialLength }.count

        // Another app meanwhile.
        let download = try Executable.hostApp.run(["download", server.url(for: "/one.bin").absoluteString, "--wait"], in: container, timeout: 60)
        peak = max(peak, residentBytes(of: daemon.pid))
        #expect(download.status == 0, "another app's download completes: \(download.stderr)")

        // The trickler is told, then cut, once its request is past the deadline.
        let trickleReply = trickler.reply(to: 0, timeout: 25)
        let trickleCut = trickler.waitUntilClosed(timeout: 5)
        let waited = Date().timeIntervalSince(trickleStarted)
        let refusedCount = clients.filter { $0.waitUntilClosed(timeout: 0.05) }.count
        print("400 identified peers each holding up to 4 MiB of a frame: \(before >> 20) MiB before, peak \(peak >> 20) MiB; \(whole) sent all but the last byte, \(cut.count) cut while sending, \(refusedCount) closed in all; trickler: \(String(describing: trickleReply)) after \(String(format: "%.1f", waited)) s")
        #expect(peak - before < 128 << 20, "the daemon grew by \((peak - before) >> 20) MiB for unfinished frames")
        #expect(refusedCount >= 300, "peers past the budget are cut off (\(refusedCount) of 400)")
        guard case .failure(let failure)? = trickleReply else { Issue.record("the trickler got \(String(describing: trickleReply))"); return }
        #expect(failure.code == TransferFailure.timedOut, "\(failure)")
        #expect(trickleCut, "the trickler's connection is closed")
        #expect(waited >= 10, "not before the deadline of 10 s (\(waited) s)")
    }
}
