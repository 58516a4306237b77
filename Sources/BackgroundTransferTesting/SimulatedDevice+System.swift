import TransferContainer
import TransferPOSIX

/// What iOS does to an app, one call each: kills, force quit, the daemon's death and
/// restart, device conditions. Called from any thread (the device's daemon is behind a lock).
extension SimulatedDevice {
    /// The network the device has (`bgtransfer conditions --network`).
    public enum Network: String, Sendable {
        /// Wi-Fi: every task may run.
        case wifi
        /// Cellular only: tasks with `allowsCellularAccess` false wait.
        case cellular
        /// No network: background tasks wait (S5.3).
        case offline
    }

    /// How the device is powered.
    public enum Power: String, Sendable {
        /// On a charger.
        case charging
        /// On battery: discretionary tasks wait.
        case battery
    }

    // MARK: The daemon

    /// The running `transferd` this test started, if any.
    public var daemon: LaunchedProcess? { daemonProcess.withLock { $0 } }

    /// Starts `transferd` (the one built beside the tests) on this container and waits until
    /// its socket answers. It takes the roots of `trustTestCertificateAuthority()`.
    public func startDaemon(within timeout: TimeInterval = 20) async throws {
        var arguments = ["--container", root.path, "--quiet", "--trusted-roots", trustedRootsFile.path]
        if let relaunchDelay { arguments += ["--relaunch-delay", "\(relaunchDelay)"] }
        let daemon = try start(ProductsFolder.executable(named: "transferd"), arguments: arguments, newSession: false)
        daemonProcess.withLock { $0 = daemon }
        let socket = layout.daemonSocket.path
        let expected = "transferd (pid \(daemon.pid)) answers on \(socket) within \(timeout) s"
        let answered: Bool
        do {
            // No event to wait for: a socket that starts to accept.
            answered = try await eventually(within: timeout, expected) { () -> Bool? in
                if let fd = try? UnixSocket.connect(to: socket) {
                    fd.close()
                    return true
                }
                return daemon.isRunning ? nil : false
            }
        } catch {
            throw TestingFailure(expected: expected, happened: "it does not")
        }
        guard answered else { throw TestingFailure(expected: expected, happened: "it exited: \(daemon.errorOutput.suffix(1000))") }
    }

    /// The daemon dies (SIGKILL), as nsurlsessiond may; waits until it is gone. Tasks, files
    /// and undelivered events stay on disk for the next daemon.
    public func killDaemon() async throws {
        guard let daemon = daemonProcess.withLock({ $0 }) else {
            throw TestingFailure(expected: "a daemon this test started", happened: "none runs on \(root.path)")
        }
        daemon.kill()
        try await daemon.exitStatus(within: 10)
        daemonProcess.withLock { $0 = nil }
    }

    /// The daemon dies and a new one starts on the same container.
    public func restartDaemon() async throws {
        try await killDaemon()
        try await startDaemon()
    }

    // MARK: Apps

    /// The system ends every running process of executable `name` on this device (SIGKILL), as
    /// iOS ends a suspended app or an extension: its transfers go on, and the app is relaunched
    /// for their events (S4.1). Waits until they are gone; returns their pids.
    @discardableResult
    public func kill(_ name: String, within timeout: TimeInterval = 10) async throws -> [Int32] {
        let pids = processes(named: name)
        for pid in pids { Glibc.kill(pid, SIGKILL) }
        do {
            // Not our children (the daemon launched them): their end can only be seen in /proc.
            try await eventually(within: timeout, "every \(name) of \(root.path) ends within \(timeout) s of SIGKILL") { self.processes(named: name).isEmpty }
        } catch {
            throw TestingFailure(expected: "every \(name) of \(root.path) ends within \(timeout) s of SIGKILL", happened: "still running: \(processes(named: name))")
        }
        return pids
    }

    /// The user force-quits the app `bundleIdentifier` (S4.2): its transfers and its
    /// extensions' are cancelled (delivered as -999 with reason 0 at its next launch), its
    /// processes end, and it is not relaunched until the user launches it again. Returns the
    /// number of tasks cancelled.
    @discardableResult
    public func forceQuit(_ bundleIdentifier: String) throws -> Int {
        let bundle: BundleIdentifier
        do { bundle = try BundleIdentifier(bundleIdentifier) } catch {
            throw TestingFailure(expected: "a bundle identifier to force-quit", happened: "\(bundleIdentifier): \(error)")
        }
        let reply = try ToolIdentity.request(.forceQuit(app: bundle), layout: layout, asking: "force-quit \(bundleIdentifier)")
        guard case .forceQuitDone(let cancelled, _) = reply else {
            throw TestingFailure(expected: "the daemon to confirm the force quit of \(bundleIdentifier)", happened: "it answered \(reply)")
        }
        return cancelled
    }

    // MARK: Device conditions

    /// Changes the simulated device conditions; the daemon obeys them at once. Each argument
    /// left out keeps its current value (at first: Wi-Fi, not expensive, not constrained,
    /// charging, no low power mode).
    public func setConditions(network: Network? = nil, expensive: Bool? = nil, constrained: Bool? = nil, power: Power? = nil, lowPowerMode: Bool? = nil) throws {
        var conditions = (try? DeviceConditions.load(from: layout)) ?? DeviceConditions()
        if let network, let value = DeviceConditions.Network(rawValue: network.rawValue) { conditions.network = value }
        if let power, let value = DeviceConditions.Power(rawValue: power.rawValue) { conditions.power = value }
        if let expensive { conditions.expensive = expensive }
        if let constrained { conditions.constrained = constrained }
        if let lowPowerMode { conditions.lowPowerMode = lowPowerMode }
        do { try conditions.save(to: layout) } catch {
            throw TestingFailure(expected: "the conditions written to \(layout.deviceConditions.path)", happened: "\(error)")
        }
        // A daemon that is not running reads them when it starts.
        if FileLock.isHeld(layout.daemonLock.path) {
            _ = try ToolIdentity.request(.conditionsChanged, layout: layout, asking: "take the new device conditions")
        }
    }
}
