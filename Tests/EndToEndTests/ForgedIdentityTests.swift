import Foundation
import Testing
import TransferContainer
import StandInSupport
import ContainerInspection

/// A hello is believed as far as the executable of the process that *wrote* it goes, not of
/// the process that connected: a socket handed on by fork (or by `SCM_RIGHTS`) to a process
/// that then lets the connecting one exec `host-app` does not make its writer `host-app`.
/// Real attacks, in a few lines of Python, against a real daemon.
@Suite(.timeLimit(.minutes(20)))
struct ForgedIdentityTests {
    /// `attack.py MODE SOCKET HOST_APP CONTAINER HELLO_HEX OPEN_HEX`: one process ends up
    /// running `host-app` (harmless: a foreground download of a port nobody listens on, for
    /// 60 s), the other speaks on the socket once it has: it sends each frame and prints the
    /// daemon's answer ("reply <json>", or "reply none").
    static let script = #"""
    import os, socket, sys, time
    mode, path, host_app, container, hello_hex, open_hex = sys.argv[1:7]
    target = os.path.realpath(host_app)
    host_args = [host_app, "--container", container, "download", "http://127.0.0.1:9/idle", "--foreground", "--time-limit", "60"]

    def running_host_app(pid):
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if os.readlink("/proc/%d/exe" % pid) == target:
                    return True
            except OSError:
                pass
            time.sleep(0.002)
        return False

    def read_frame(s):
        data = b""
        while len(data) < 4:
            chunk = s.recv(4 - len(data))
            if not chunk:
                return None
            data += chunk
        length = int.from_bytes(data, "big")
        body = b""
        while len(body) < length:
            chunk = s.recv(length - len(body))
            if not chunk:
                return None
            body += chunk
        return body

    def speak(s, host_pid):
        s.settimeout(10)
        if not running_host_app(host_pid):
            print("host-app did not start", flush=True)
            sys.exit(3)
        print("host-app is pid %d" % host_pid, flush=True)
        for frame in (hello_hex, open_hex):
            try:
                s.sendall(bytes.fromhex(frame))
                body = read_frame(s)
            except OSError:
                body = None
            print("reply " + (body.decode() if body is not None else "none"), flush=True)

    if mode == "parent-execs":
        # Connect, fork; the connecting process becomes host-app, the child speaks.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        parent = os.getpid()
        if os.fork() != 0:
            os.execv(host_app, host_args)
        speak(s, parent)
    elif mode == "child-execs":
        # Fork; the child connects, hands the socket to the parent and becomes host-app.
        mine, theirs = socket.socketpair()
        child = os.fork()
        if child == 0:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            socket.send_fds(theirs, [b"x"], [s.fileno()])
            os.execv(host_app, host_args)
        _, fds, _, _ = socket.recv_fds(mine, 1, 1)
        speak(socket.socket(fileno=fds[0]), child)
    elif mode == "write-then-exec":
        # Write a hello and a request, then become host-app before the daemon reads them.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(bytes.fromhex(hello_hex) + bytes.fromhex(open_hex))
        os.execv(host_app, host_args)
    elif mode == "write-on-stdin":
        # The socket is stdin (someone else's connection): send a request on it.
        s = socket.socket(fileno=0)
        s.settimeout(10)
        try:
            s.sendall(bytes.fromhex(open_hex))
            body = read_frame(s)
        except OSError:
            body = None
        print("reply " + (body.decode() if body is not None else "none"), flush=True)
    """#

    static let forgedSession = "com.example.host.forged"

    /// The attack's frames: a hello claiming the host app (exactly as host-app declares it),
    /// and the opening of a session of the host's family.
    static func frames(claiming identity: AppIdentity = StandInIdentities.host, session: String = forgedSession) throws -> (hello: String, open: String) {
        let hello = ClientHello(identity: identity, executablePath: "/forged", processName: "forger", isForeground: false)
        let helloFrame = try Frame.encode(RequestFrame(id: 1, request: .hello(hello)))
        let openFrame = try Frame.encode(RequestFrame(id: 2, request: .openSession(identifier: try SessionIdentifier(session), configuration: SessionConfiguration(), launchedForEvents: false)))
        func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }
        return (hex(helloFrame), hex(openFrame))
    }

    static func runAttack(_ mode: String, in container: TestContainer, hello: String, open: String) throws -> RunningProcess {
        let script = container.parent.appendingPathComponent("attack.py")
        try Data(Self.script.utf8).write(to: script)
        return try Executable(name: "env", path: "/usr/bin/env").start(
            ["python3", script.path, mode, container.layout.daemonSocket.path, Executable.hostApp.path, container.root, hello, open],
            in: container, passContainer: false)
    }

    /// The daemon's answers the speaking process printed, in order (nil: none came).
    static func replies(_ output: String) -> [DaemonReply?] {
        output.split(separator: "\n").filter { $0.hasPrefix("reply ") }.map { line in
            let json = line.dropFirst("reply ".count)
            guard json != "none", case .reply(_, let reply)? = try? Frame.decode(DaemonFrame.self, from: Data(json.utf8)) else { return nil }
            return reply
        }
    }

    static func sessionExists(_ identifier: String, in container: TestContainer) -> Bool {
        ContainerSnapshot.read(container.layout).sessions.contains { $0.identifier == identifier }
    }

    @Test("Connect, fork, the connecting process execs host-app and the child says hello as com.example.host: refused, no session, and the log says why", arguments: ["parent-execs", "child-execs"])
    func forkThenExec(mode: String) throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let (hello, open) = try Self.frames()
        let attack = try Self.runAttack(mode, in: container, hello: hello, open: open)
        defer { attack.kill() }

        #expect(waitUntil(timeout: 30) { Self.replies(attack.stdout).count == 2 || attack.stdout.contains("did not start") }, "the attacker did not finish: \(attack.stdout) \(attack.stderr)")
        let replies = Self.replies(attack.stdout)
        try #require(replies.count == 2, "\(attack.stdout) \(attack.stderr)")
        let refusal = replies[0]?.failureMessage
        #expect(refusal?.contains("may not act as com.example.host") == true, "the hello is refused: \(String(describing: replies[0]))")
        #expect(refusal?.contains("python") == true, "the refusal names the writer's executable: \(String(describing: refusal))")
        #expect(replies[1]?.failureMessage?.contains("say hello first") == true, "no session for the forger: \(String(describing: replies[1]))")
        #expect(!Self.sessionExists(Self.forgedSession, in: container))
        let logged = container.waitForLog(timeout: 5) { $0.process == "transferd" && $0.category == "trust" && $0.message.contains("may not act as com.example.host") }
        #expect(logged != nil, "the daemon logs the refusal (category trust)")
    }

    @Test("A hello and a request written before the writer execs host-app are not believed: a hello is a round trip")
    func writeThenExec() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let daemon = try DaemonUnderTest.start(container)
        let (hello, open) = try Self.frames()
        // The daemon is stopped while the attacker writes and execs, so that it reads the
        // bytes only once their writer runs host-app.
        sendSignal(daemon.pid, SIGSTOP)
        var stopped = true
        defer { if stopped { sendSignal(daemon.pid, SIGCONT) } }
        let attack = try Self.runAttack("write-then-exec", in: container, hello: hello, open: open)
        defer { attack.kill() }
        let hostApp = URL(fileURLWithPath: Executable.hostApp.path).resolvingSymlinksInPath().path
        let execd = waitUntil(timeout: 20) { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(attack.pid)/exe")) == hostApp }
        sendSignal(daemon.pid, SIGCONT)
        stopped = false
        try #require(execd, "the attacker did not become host-app: \(attack.stderr)")

        let logged = container.waitForLog(timeout: 10) { $0.process == "transferd" && $0.category == "trust" && $0.message.contains("before its hello") }
        #expect(logged != nil, "the daemon refuses the hello and says why: \(container.logEntries(process: "transferd").map(\.message))")
        // A round trip through the daemon's loop: an open let through with the hello would have
        // been handled in the turn that logged the refusal, its session made on disk then.
        _ = try DaemonEndpoint.request(.ping, layout: container.layout, timeout: 20)
        #expect(!Self.sessionExists(Self.forgedSession, in: container), "no session for the forger")
    }

    @Test("After a verified hello, bytes from another process on the same connection close it; what it asked for is not done")
    func anotherWriterAfterHello() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let client = try RawClient(container)
        defer { client.close() }
        let hello = ClientHello(identity: testIdentity("com.example.tests"), executablePath: "/tests", processName: "tests", isForeground: false)
        let welcome = try client.request(.hello(hello), id: 1)
        guard case .welcome? = welcome else {
            Issue.record("the test process is not welcomed: \(String(describing: welcome))")
            return
        }

        // Another process gets the socket (as its stdin) and asks for a session on it.
        let (_, open) = try Self.frames(session: "com.example.tests.stolen")
        let script = container.parent.appendingPathComponent("attack.py")
        try Data(Self.script.utf8).write(to: script)
        let output = container.parent.appendingPathComponent("stdin-writer.out")
        let child = try ChildProcess("/usr/bin/env", arguments: ["python3", script.path, "write-on-stdin", "-", "-", container.root, "-", open],
                                     environment: ProcessInfo.processInfo.environment, stdout: output, stderr: output, input: client.fd)
        let writer = RunningProcess(child: child, stdoutPath: output, stderrPath: output, containerRoot: container.root)
        let outcome = writer.wait(timeout: 20)
        #expect(outcome.status == 0, "\(outcome.stdout)")

        #expect(Self.replies(outcome.stdout).first.flatMap { $0 } == nil, "the other process gets no answer: \(outcome.stdout)")
        #expect(client.waitUntilClosed(timeout: 10), "the daemon closes the connection")
        #expect(!ContainerSnapshot.read(container.layout).sessions.contains { $0.identifier == "com.example.tests.stolen" }, "no session was opened")
        let logged = container.waitForLog(timeout: 5) { $0.process == "transferd" && $0.category == "trust" && $0.message.contains("wrote on the connection of process \(getpid())") }
        #expect(logged != nil, "the daemon logs why: \(container.logEntries(process: "transferd").map(\.message))")
    }

    /// The kernel gives a new process the number after the last one it handed out
    /// (`/proc/sys/kernel/ns_last_pid`, which root may set): host-app is started as `pid` (free
    /// now) by setting it to `pid - 1` just before, again if host-app was given another number.
    /// nil when that cannot be done, or when another process has taken the number.
    static func startHostApp(asPID pid: Int32, in container: TestContainer) throws -> RunningProcess? {
        for _ in 0..<100 {
            guard kill(pid, 0) != 0 else { return nil } // someone else has the number now
            let fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY)
            guard fd >= 0 else { return nil }
            let text = "\(pid - 1)"
            let written = write(fd, text, text.utf8.count)
            close(fd)
            guard written == text.utf8.count else { return nil }
            let host = try Executable.hostApp.start(["download", "http://127.0.0.1:9/idle", "--foreground", "--time-limit", "60"], in: container)
            if host.pid == pid { return host }
            // Ours and not reaped, so the number is still this child's, exec'd yet or not.
            sendSignal(host.pid, SIGKILL)
            _ = host.wait(timeout: 10)
        }
        return nil
    }

    /// A hello is read some time after it was written. By then its writer may have exited and
    /// its number gone to another process: the executable behind the number is then not the
    /// writer's, and the daemon must see that the writer is gone (its pidfd, taken with the bytes).
    @Test("A hello whose writer has exited, and whose pid is host-app's by the time the daemon reads it, is refused: no welcome as com.example.host", .enabled(if: getuid() == 0, "placing a process at a chosen pid needs root (ns_last_pid)"))
    func writerGoneBeforeTheHelloIsRead() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let daemon = try DaemonUnderTest.start(container)
        let (hello, _) = try Self.frames()
        let hostApp = URL(fileURLWithPath: Executable.hostApp.path).resolvingSymlinksInPath().path

        // Another test's process may take the writer's number between its exit and host-app's
        // start (the kernel hands it to whoever forks first); the scene is then set again on a
        // new connection, up to ten times.
        for attempt in 1...10 {
            let client = try RawClient(container)
            defer { client.close() }
            // The daemon is stopped while a short-lived process writes the hello on the test's
            // connection and exits, and host-app takes its number.
            sendSignal(daemon.pid, SIGSTOP)
            var stopped = true
            defer { if stopped { sendSignal(daemon.pid, SIGCONT) } }
            let output = container.parent.appendingPathComponent("hello-writer-\(attempt).out")
            let writer = try ChildProcess("/usr/bin/env", arguments: ["python3", "-c", "import os, sys; os.write(0, bytes.fromhex(sys.argv[1]))", hello, container.root],
                                          environment: ProcessInfo.processInfo.environment, stdout: output, stderr: output, input: client.fd)
            try #require(writer.waitForExit(timeout: 20) == 0, "the hello writer failed: \((try? String(contentsOf: output, encoding: .utf8)) ?? "")")
            guard let host = try Self.startHostApp(asPID: writer.pid, in: container) else {
                print("attempt \(attempt): process \(writer.pid) was taken by another process before host-app could have it")
                continue
            }
            defer { host.kill() }
            let execd = waitUntil(timeout: 20) { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(writer.pid)/exe")) == hostApp }
            sendSignal(daemon.pid, SIGCONT)
            stopped = false
            try #require(execd, "process \(writer.pid) is not host-app")

            let reply = client.reply(to: 1, timeout: 10)
            guard case .failure(let failure)? = reply else {
                Issue.record("the hello of a process that has exited is not refused: \(String(describing: reply))")
                return
            }
            #expect(failure.code == TransferFailure.requestRefused, "\(failure)")
            #expect(host.isRunning, "host-app ran as process \(writer.pid) throughout")
            return
        }
        Issue.record("in ten attempts host-app could not be started as the hello writer's process number")
    }
}
