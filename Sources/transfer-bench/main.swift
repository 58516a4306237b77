import Foundation
import LoopbackServer
import TransferContainer

// transfer-bench: figures measured on this machine, each against a reference in the same run.
//   transfer-bench refetch [--size MiB] [--runs N]   bytes fetched again after a SIGKILL of transferd at 50 %
//   transfer-bench upload [--size MiB] [--runs N]    an upload through the daemon ÷ curl -T; bytes sent again after a kill

let usage = "usage: transfer-bench refetch|upload [--size MiB] [--runs N]"
let arguments = Array(CommandLine.arguments.dropFirst())

@MainActor func option(_ name: String, default value: Int) -> Int {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let number = Int(arguments[index + 1]) else { return value }
    return number
}

switch arguments.first {
case "refetch":
    let size = Int64(option("--size", default: 1024)) << 20
    let runs = option("--runs", default: 3)
    exit(RefetchBenchmark(size: size, runs: runs).run())
case "upload":
    let size = Int64(option("--size", default: 1024)) << 20
    exit(UploadBenchmark(size: size, runs: option("--runs", default: 5)).run())
default:
    print(usage)
    exit(arguments.isEmpty ? 0 : 64)
}
