import Foundation
import TransferContainer
import TransferEngine

// transferd: the transfer daemon. `transferd [--container PATH] [--exit-when-idle SECONDS]
// [--relaunch-delay SECONDS] [--free-space-reserve MIB] [--quiet]`. Runs in the foreground until SIGTERM/SIGINT.

let usage = "usage: transferd [--container PATH] [--exit-when-idle SECONDS] [--relaunch-delay SECONDS] [--background-budget SECONDS] [--max-transfers N] [--free-space-reserve MIB] [--quiet]"

func fail(_ text: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("transferd: \(text)\n".utf8))
    exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())
let layout: ContainerLayout
do { layout = try ContainerLayout.resolve(arguments: &arguments) } catch { fail("\(error)", status: 64) }
var options = TransferDaemon.Options(layout: layout)

func seconds(_ option: String, in arguments: inout [String]) -> TimeInterval {
    guard let index = arguments.firstIndex(of: option) else { return -1 }
    guard index + 1 < arguments.count, let value = TimeInterval(arguments[index + 1]), CheckedNumbers.intervals.contains(value) else {
        fail("\(option) needs a number of seconds\n\(usage)", status: 64)
    }
    arguments.removeSubrange(index...(index + 1))
    return value
}

let idle = seconds("--exit-when-idle", in: &arguments)
if idle >= 0 { options.exitWhenIdle = idle }
let delay = seconds("--relaunch-delay", in: &arguments)
if delay >= 0 { options.relaunchDelay = delay }
let budget = seconds("--background-budget", in: &arguments)
if budget >= 0 { options.backgroundBudget = budget }
if let index = arguments.firstIndex(of: "--max-transfers") {
    guard index + 1 < arguments.count, let limit = Int(arguments[index + 1]), limit > 0 else { fail("--max-transfers needs a positive number\n\(usage)", status: 64) }
    options.maximumConcurrentTransfers = limit
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--free-space-reserve") {
    guard index + 1 < arguments.count, let mebibytes = Int64(arguments[index + 1]), (0...(1 << 40)).contains(mebibytes) else {
        fail("--free-space-reserve needs a number of MiB (0 to 1099511627776)\n\(usage)", status: 64)
    }
    options.freeSpaceReserve = mebibytes << 20
    arguments.removeSubrange(index...(index + 1))
}
if let index = arguments.firstIndex(of: "--quiet") {
    options.echoLevel = nil
    arguments.remove(at: index)
}
if arguments == ["--help"] || arguments == ["-h"] {
    print(usage)
    exit(0)
}
// A testing aid: see TransferDaemon.Options.crashOnResponseHeader.
options.crashOnResponseHeader = ProcessInfo.processInfo.environment["BGTRANSFER_FAULT_CRASH_ON_RESPONSE_HEADER"]
guard arguments.isEmpty else { fail("unknown arguments \(arguments)\n\(usage)", status: 64) }

do {
    let daemon = try TransferDaemon(options: options)
    try daemon.run()
    exit(0)
} catch let error as DaemonError {
    fail("\(error)", status: 3)
} catch {
    fail("\(error)", status: 1)
}
