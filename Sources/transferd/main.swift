import Foundation
import TransferContainer
import TransferEngine
import CommandLineTools
import TransferLogging

// transferd: the transfer daemon. `transferd [--container PATH] [--exit-when-idle SECONDS]
// [--relaunch-delay SECONDS] [--max-tasks-per-app N] [--max-bytes-per-app N]
// [--free-space-reserve MIB] [--idle-connection-timeout SECONDS] [--trusted-roots FILE] [--log-level LEVEL]
// [--quiet]`.
// Runs in the foreground until SIGTERM/SIGINT. Its settings come from this command line;
// from the environment only what a service manager sets (systemd's LISTEN_*, NOTIFY_SOCKET,
// JOURNAL_STREAM) and BGTRANSFER_LOG_LEVEL when --log-level is not given, which a unit may set
// (Environment=): a daemon started on demand by a client gets a minimal environment
// (DaemonEndpoint.daemonEnvironment), so no client's setting reaches it.

let usage = CommandLineUsage(program: "transferd", forms: [
    "[--container PATH] [--exit-when-idle SECONDS] [--relaunch-delay SECONDS] "
    + "[--background-budget SECONDS] [--max-transfers N] [--max-tasks-per-app N] [--max-bytes-per-app N] "
    + "[--free-space-reserve MIB] [--idle-connection-timeout SECONDS] [--trusted-roots FILE] [--log-level LEVEL] "
    + "[--quiet]"],
    details: """
    The transfer daemon of one container, in the foreground until SIGTERM or SIGINT (clients
    start it on demand with --exit-when-idle).
      --exit-when-idle SECONDS      exit after this long with nothing to do
      --relaunch-delay SECONDS      the resume rate limiter's first delay (default 60)
      --background-budget SECONDS   how long an app launched for events may run (default 30)
      --max-transfers N             transfers at once in the whole daemon (default 32)
      --max-tasks-per-app N         unfinished tasks one app may have, all its sessions together (default 200000)
      --max-bytes-per-app N         bytes of task records and undelivered events one app may make the daemon
                                    hold, all its sessions together (default 268435456: 256 MiB)
      --free-space-reserve MIB      what downloads and new tasks leave free on the container's file system (default 64)
      --idle-connection-timeout SECONDS
                                    how long an app's connection may hold no session, watch or reply (default 60)
      --trusted-roots FILE          root certificates (PEM) every app trusts, besides the container's
                                    Daemon/trusted-roots.pem: for development and tests. An absolute path, read
                                    at start and on `bgtransfer conditions`, at most 1 MiB, a regular file and
                                    not a symlink, owned by root or by the user transferd runs as, and writable
                                    by no group or other; else no roots are taken from it (the log says why).
                                    A daemon started on demand by a client never has it.
      --log-level LEVEL             the quietest level logged: debug, info, notice, error or fault (default:
                                    $BGTRANSFER_LOG_LEVEL of whoever ran transferd, else notice)
      --quiet                       log nothing to stderr

    UNDER SYSTEMD (see Examples/service/ and README.md, "Run it as a service"):
      LISTEN_FDS, LISTEN_PID        serve the listening socket passed (socket activation); it must
                                    be the container's Daemon/transferd.sock, else exit 78
      NOTIFY_SOCKET, WATCHDOG_USEC  report READY=1, STATUS=, STOPPING=1 and the watchdog
      JOURNAL_STREAM                stderr lines start with their syslog priority (<3> error, <5> notice)
    """, summary: "the BackgroundTransfer daemon: background downloads and uploads of one container")
usage.helpIfAsked(Array(CommandLine.arguments.dropFirst()))

var arguments = Array(CommandLine.arguments.dropFirst())
let layout: ContainerLayout
do { layout = try ContainerLayout.resolve(arguments: &arguments) } catch { usage.usageError("\(error)") }
var options = TransferDaemon.Options(layout: layout)

func seconds(_ option: String, in arguments: inout [String]) -> TimeInterval {
    guard let index = arguments.firstIndex(of: option) else { return -1 }
    guard index + 1 < arguments.count, let value = TimeInterval(arguments[index + 1]), CheckedNumbers.intervals.contains(value) else {
        usage.usageError("\(option) needs a number of seconds (0 to 1e9)")
    }
    arguments.removeSubrange(index...(index + 1))
    return value
}

let idle = seconds("--exit-when-idle", in: &arguments)
if idle >= 0 { options.exitWhenIdle = idle }
let delay = seconds("--relaunch-delay", in: &arguments)
if delay >= 0 { options.relaunchDelay = delay }
let idleConnection = seconds("--idle-connection-timeout", in: &arguments)
if idleConnection >= 0 { options.idleConnectionTimeout = idleConnection }
let budget = seconds("--background-budget", in: &arguments)
if budget >= 0 { options.backgroundBudget = budget }
if let index = arguments.firstIndex(of: "--max-transfers") {
    guard index + 1 < arguments.count, let limit = Int(arguments[index + 1]), limit > 0 else { usage.usageError("--max-transfers needs a positive number") }
    options.maximumConcurrentTransfers = limit
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--max-tasks-per-app") {
    guard index + 1 < arguments.count, let cap = Int(arguments[index + 1]), (1...100_000_000).contains(cap) else {
        usage.usageError("--max-tasks-per-app needs a number from 1 to 100000000")
    }
    options.maximumTasksPerApp = cap
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--max-bytes-per-app") {
    guard index + 1 < arguments.count, let budget = Int(arguments[index + 1]), (1...(1 << 40)).contains(budget) else {
        usage.usageError("--max-bytes-per-app needs a number of bytes from 1 to 1099511627776")
    }
    options.maximumBytesPerApp = budget
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--free-space-reserve") {
    guard index + 1 < arguments.count, let mebibytes = Int64(arguments[index + 1]), (0...(1 << 40)).contains(mebibytes) else {
        usage.usageError("--free-space-reserve needs a number of MiB (0 to 1099511627776)")
    }
    options.freeSpaceReserve = mebibytes << 20
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--trusted-roots") {
    // Whoever can give transferd options can run a daemon of their own anyway: no privilege is granted here.
    guard index + 1 < arguments.count, arguments[index + 1].hasPrefix("/") else {
        usage.usageError("--trusted-roots needs an absolute path")
    }
    options.trustedRootsFile = arguments[index + 1]
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--quiet") {
    options.echoLevel = nil
    arguments.remove(at: index)
}
if let index = arguments.firstIndex(of: "--log-level") {
    guard index + 1 < arguments.count, let level = LogLevel(rawValue: arguments[index + 1]) else {
        usage.usageError("--log-level needs one of \(LogLevel.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    options.logLevel = level
    arguments.removeSubrange(index...(index + 1))
}
// Testing aids (see TransferDaemon.Options.crashOnResponseHeader, freezeOnAcknowledgement), taken from this command
// line only, never from the environment, and refused by a release build.
if let index = arguments.firstIndex(of: "--fault-crash-on-response-header") {
    #if DEBUG
    guard index + 1 < arguments.count, !arguments[index + 1].isEmpty else { usage.usageError("--fault-crash-on-response-header needs a header field name") }
    options.crashOnResponseHeader = arguments[index + 1]
    arguments.removeSubrange(index...(index + 1))
    #else
    _ = index
    usage.usageError("--fault-crash-on-response-header is a testing aid of debug builds; this transferd is a release build")
    #endif
}
if let index = arguments.firstIndex(of: "--fault-freeze-on-acknowledgement") {
    #if DEBUG
    options.freezeOnAcknowledgement = true
    arguments.remove(at: index)
    #else
    _ = index
    usage.usageError("--fault-freeze-on-acknowledgement is a testing aid of debug builds; this transferd is a release build")
    #endif
}
if let other = arguments.first { usage.usageError(CommandLineUsage.unknown(other, what: "argument")) }

// Under systemd: the socket it listens on for us (socket activation) and where readiness goes.
// A socket that is not the container's is a unit written wrong: EX_CONFIG, which the units
// name in RestartPreventExitStatus= so that it is not restarted in a loop.
do { options.listener = try SocketActivation.listener(for: layout.daemonSocket.path) } catch { usage.fail("\(error)", status: 78) }
do { options.notifier = try ServiceNotifier.fromEnvironment() } catch { usage.fail("NOTIFY_SOCKET cannot be used: \(error)", status: 78) }

do {
    let daemon = try TransferDaemon(options: options)
    try daemon.run()
    exit(0)
} catch let error as DaemonError {
    usage.fail("\(error)", status: 3)
} catch {
    usage.fail("\(error)", status: 1)
}
