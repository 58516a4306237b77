import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

extension RequestHandler {
    /// A process says who it is; it is believed only as far as the executable of the process
    /// that wrote the hello goes (the kernel names the writer of every read: not the process
    /// that connected, which may have handed the socket on), and its executable path is the
    /// kernel's, not its own.
    func welcome(_ claimed: ClientHello, _ connection: ClientConnection) throws -> DaemonReply {
        var hello = claimed
        guard hello.identity.kind != .appExtension || hello.identity.containingApp != hello.identity.bundleIdentifier else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "an extension must name its containing app")
        }
        guard let writer = connection.writer else {
            throw TransferFailure(code: TransferFailure.requestRefused, message: "the daemon cannot see who wrote the hello (no credentials)")
        }
        let pid = writer.pid
        // A handle on the writer (the kernel's, taken with its bytes; else one opened before its
        // executable is read): alive after the read, the pid still named the writer.
        func refuse(_ message: String) -> TransferFailure {
            log.error("trust", "refused: \(message)")
            return TransferFailure(code: TransferFailure.requestRefused, message: message, subject: hello.identity.bundleIdentifier.rawValue)
        }
        var opened: ProcessHandle?
        if writer.process == nil {
            do { opened = try ProcessHandle.open(pid: pid) } catch {
                throw refuse("cannot hold on to process \(pid), which wrote the hello as \(hello.identity.bundleIdentifier), while its executable is checked: \(error)")
            }
        }
        defer { opened?.close() }
        let peer = try peers.identify(pid: pid)
        guard (writer.process ?? opened)?.isRunning == true else {
            throw refuse("process \(pid), which wrote the hello as \(hello.identity.bundleIdentifier), exited before its executable could be checked")
        }
        guard peer.entitled.contains(hello.identity) else {
            let declared = peer.entitled.isEmpty ? "no entitlements" : peer.entitled.map { "\($0.bundleIdentifier) (groups \($0.appGroups.map(\.rawValue).joined(separator: ", ")))" }.joined(separator: "; ")
            let connected = connection.credentials.map { $0.pid == pid ? "" : " (the connection was opened by process \($0.pid))" } ?? ""
            throw refuse("process \(pid) (\(peer.executablePath)) may not act as \(hello.identity.bundleIdentifier) with app groups [\(hello.identity.appGroups.map(\.rawValue).joined(separator: ", "))]: its executable declares \(declared)\(connected)")
        }
        // What the writer sent before this hello was answered may have been written by another
        // executable (it may have exec'd since): a hello is a round trip.
        guard !connection.hasUnreadInput else {
            throw refuse("process \(pid) (\(peer.executablePath)) sent more before its hello as \(hello.identity.bundleIdentifier) was answered; wait for the welcome")
        }
        if let reason = clients.shareRefusal(forApp: hello.identity.family) {
            log.error("ipc", "refused a hello: \(reason)")
            throw TransferFailure(code: TransferFailure.requestRefused, message: reason,
                                  subject: hello.identity.bundleIdentifier.rawValue)
        }
        hello.executablePath = peer.executablePath
        connection.hello = hello
        if hello.identity.kind != .tool { registry.register(hello, at: clock.now) }
        if hello.isForeground && hello.identity.kind == .app {
            // The user launched the app: the rate limiter starts over (S6.5), a force quit ends (S4.2).
            relauncher.relaunchLimiter[hello.identity.family] = nil
            relauncher.userLaunched(hello.identity.family)
            if registry.forceQuit.contains(hello.identity.family) {
                registry.setForceQuit(hello.identity.family, false)
                log.notice("relaunch", "\(hello.identity.family) launched by the user: relaunching allowed again")
            }
        }
        log.info("ipc", "hello from \(hello.processName) (\(hello.identity.bundleIdentifier)) pid \(connection.pid ?? -1)")
        return .welcome(daemonPID: getpid())
    }
}
