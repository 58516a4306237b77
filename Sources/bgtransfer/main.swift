import Foundation
import TransferContainer

// bgtransfer: the developer's tool around the daemon.
//   bgtransfer [--container PATH] inspect [--json] [--session ID]
//   bgtransfer [--container PATH] demo

let usage = """
usage: bgtransfer [--container PATH] <command>
  inspect [--json] [--session ID]   show the daemon, apps, sessions, tasks, pending events and files
  demo                              a background download from an extension, end to end
"""

var arguments = Array(CommandLine.arguments.dropFirst())
let layout: ContainerLayout
do { layout = try ContainerLayout.resolve(arguments: &arguments) } catch { Tool.fail("\(error)", status: 64) }

switch arguments.first {
case "inspect":
    Inspect.run(layout: layout, arguments: Array(arguments.dropFirst()))
case "demo":
    exit(Demo(layout: layout).run())
case "help", "--help", "-h":
    print(usage)
default:
    Tool.fail("unknown command\n\(usage)", status: 64)
}

/// Shared helpers of the tool's commands.
enum Tool {
    static func fail(_ text: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("bgtransfer: \(text)\n".utf8))
        exit(status)
    }

    /// The directory holding this executable and its siblings (transferd, host-app, extensions).
    static var executablesDirectory: String {
        (ProcessSpawner.currentExecutable as NSString).deletingLastPathComponent
    }

    static func bytes(_ count: Int64) -> String {
        if count < 0 { return "?" }
        if count < 1024 { return "\(count) B" }
        if count < 1 << 20 { return String(format: "%.1f KiB", Double(count) / 1024) }
        if count < 1 << 30 { return String(format: "%.1f MiB", Double(count) / 1048576) }
        return String(format: "%.2f GiB", Double(count) / 1073741824)
    }
}
