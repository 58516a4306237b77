import TransferContainer
import TransferPOSIX

/// One test's device: a private container in a temporary folder (removed by `shutDown()`),
/// its own `transferd`, and the adopter's executables launched on it as the daemon launches
/// them. What the system does to an app is one call each (SimulatedDevice+System.swift).
/// Any thread may use it; its daemon is behind a lock.
public final class SimulatedDevice: @unchecked Sendable {
    /// The container: the device's file system as the library sees it (`--container`).
    public let root: URL
    /// The temporary folder holding the container and the captured output.
    let parent: URL
    let layout: ContainerLayout
    let relaunchDelay: TimeInterval?
    let daemonProcess = Locked<LaunchedProcess?>(nil)
    /// The roots the device's daemon trusts (`transferd --trusted-roots`), outside the
    /// container; there once `trustTestCertificateAuthority()` made it.
    var trustedRootsFile: URL { parent.appendingPathComponent("trusted-roots.pem") }

    /// Makes the container and starts `transferd` on it.
    /// - Parameter relaunchDelay: the resume rate limiter's first delay (S6.5): how long after
    ///   one relaunch of an app the next may come, doubling each time. Short by default (0.1 s),
    ///   so that a test sees several relaunches; 0 skips the limiter; nil keeps Apple's 60 s.
    /// - Parameter startsDaemon: false to start it later (`startDaemon()`), or to let the
    ///   first client start one on demand, as a user's device does.
    public init(relaunchDelay: TimeInterval? = 0.1, startsDaemon: Bool = true) async throws {
        _ = Self.leftoversEnded
        parent = URL(fileURLWithPath: "/tmp/bgtt-\(getpid())-\(UUID().uuidString.prefix(8))", isDirectory: true)
        layout = ContainerLayout(root: parent.appendingPathComponent("container", isDirectory: true))
        root = layout.root
        self.relaunchDelay = relaunchDelay
        do {
            try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
            try layout.prepare()
            // Switches DelegateEventRecorder on in every process of this container.
            try FileManager.default.createDirectory(at: root.appendingPathComponent(DelegateEventRecorder.folder), withIntermediateDirectories: true)
        } catch {
            throw TestingFailure(expected: "a fresh container at \(root.path)", happened: "\(error)")
        }
        if startsDaemon { try await startDaemon() }
    }

    /// What the delegates of this device's processes recorded (`DelegateEventRecorder`).
    public var events: DelegateEventLog { DelegateEventLog(folder: root.appendingPathComponent(DelegateEventRecorder.folder)) }

    /// The shared container of an app group (`containerURL(forSecurityApplicationGroupIdentifier:)`).
    public func appGroupFolder(_ group: String) -> URL {
        root.appendingPathComponent("AppGroups", isDirectory: true).appendingPathComponent(group, isDirectory: true)
    }

    /// The private container of an app, extension or plain program (`program.<executable>`
    /// for a program that declares no entitlements); its `Documents/` is inside.
    public func privateFolder(_ bundleIdentifier: String) -> URL {
        root.appendingPathComponent("Apps", isDirectory: true).appendingPathComponent(bundleIdentifier, isDirectory: true)
    }

    /// What the apps the daemon relaunched wrote (their standard output and error).
    public var relaunchedAppsOutput: String {
        (try? String(contentsOf: layout.logsDirectory.appendingPathComponent("launched-apps.out"), encoding: .utf8)) ?? ""
    }

    // MARK: Launching

    /// A user launch: starts the executable product `name` (built beside the tests) with
    /// `--container` and `arguments`, as a person would from a shell.
    public func launch(_ name: String, arguments: [String] = []) throws -> LaunchedProcess {
        try launch(executable: ProductsFolder.executable(named: name), arguments: arguments)
    }

    /// A user launch of the executable at `executable`. iOS runs one copy of an app: a copy the
    /// daemon launched for background events is brought to the front, not started twice. So
    /// while such a copy of the same executable still runs (it may hold a session the new one
    /// opens, which would then fail with -996), the launch waits for it to exit, up to
    /// `relaunchedCopyWait`, and fails with `TestingFailure` if it is still running then.
    public func launch(executable: URL, arguments: [String] = []) throws -> LaunchedProcess {
        try waitForRelaunchedCopies(of: executable.lastPathComponent)
        return try start(executable, arguments: ["--container", root.path] + arguments, newSession: false)
    }

    /// How long a user launch waits for a copy of the same program launched for background
    /// events to exit: the daemon's background budget (30 s), after which it ends the copy.
    public static let relaunchedCopyWait: TimeInterval = 35

    /// Waits until no process of executable `name` that the daemon launched for background
    /// events runs on this device (polling `/proc`: it is not this process's child).
    func waitForRelaunchedCopies(of name: String) throws(TestingFailure) {
        let deadline = Date().addingTimeInterval(Self.relaunchedCopyWait)
        while case let copies = processes(named: name).filter({ ProcessSpawner.commandLine(of: $0)?.contains("--handle-events-for-background-session") == true }), !copies.isEmpty {
            guard Date() < deadline else {
                throw TestingFailure(expected: "the copy of \(name) launched for background events (pid \(copies.map(String.init).joined(separator: ", "))) to exit before a user launch",
                                     happened: "still running after \(Int(Self.relaunchedCopyWait)) s")
            }
            usleep(10_000)
        }
    }

    /// Starts the app `name` as the daemon relaunches it for a background session's events
    /// (S3.1): `--container PATH --handle-events-for-background-session IDENTIFIER`, in a
    /// session of its own.
    public func launchForBackgroundEvents(_ name: String, session identifier: String) throws -> LaunchedProcess {
        try start(ProductsFolder.executable(named: name), arguments: ["--container", root.path, "--handle-events-for-background-session", identifier], newSession: true)
    }

    func start(_ executable: URL, arguments: [String], newSession: Bool) throws(TestingFailure) -> LaunchedProcess {
        let id = UUID().uuidString.prefix(8)
        let name = executable.lastPathComponent
        return try LaunchedProcess(executable: executable, arguments: arguments, newSession: newSession,
                                   outputFile: parent.appendingPathComponent("\(name)-\(id).out"), errorFile: parent.appendingPathComponent("\(name)-\(id).err"), marker: root.path)
    }

    /// The pids of the running processes of executable `name` on this device (those the test
    /// started and those the daemon launched), found by `--container` on their command line.
    public func processes(named name: String) -> [Int32] {
        Self.processes(naming: root.path).filter { pid in
            ProcessSpawner.commandLine(of: pid)?.first.map { ($0 as NSString).lastPathComponent == name } == true
        }
    }

    // MARK: The end

    /// Ends every process of this device (the daemon, the apps it launched, those the test
    /// started) by its pid, then removes the container. Call it at the end of each test
    /// (`defer`); `BACKGROUNDTRANSFER_KEEP_TEST_CONTAINERS=1` keeps the folder for a look.
    public func shutDown() {
        for pid in Self.processes(naming: root.path) { Glibc.kill(pid, SIGKILL) }
        if ProcessInfo.processInfo.environment["BACKGROUNDTRANSFER_KEEP_TEST_CONTAINERS"] == nil {
            try? FileManager.default.removeItem(at: parent)
        }
    }

    /// Every process whose command line names `root`; never this one.
    static func processes(naming root: String) -> [Int32] {
        let own = getpid()
        return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { name -> Int32? in
            guard let pid = Int32(name), pid != own, ProcessSpawner.commandLine(of: pid)?.contains(root) == true else { return nil }
            return pid
        }
    }

    /// A test process that crashed never shut its devices down: the first device of each test
    /// process ends the processes of those whose test process is gone, and removes their folders.
    private static let leftoversEnded: Void = {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? [] where name.hasPrefix("bgtt-") {
            let parts = name.split(separator: "-")
            guard parts.count == 3, let pid = Int32(parts[1]), pid != getpid(), Glibc.kill(pid, 0) != 0, errno == ESRCH else { continue }
            for leftover in processes(naming: "/tmp/\(name)/container") { Glibc.kill(leftover, SIGKILL) }
            try? FileManager.default.removeItem(atPath: "/tmp/\(name)")
        }
    }()
}
