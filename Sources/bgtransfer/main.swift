import Foundation
import TransferContainer
import ContainerInspection
import CommandLineTools
import TransferPOSIX

// bgtransfer: the developer's tool around the daemon.
//   bgtransfer [--container PATH] inspect [--json] [--session ID]
//   bgtransfer [--container PATH] watch [--session ID] [--once]
//   bgtransfer [--container PATH] conditions [--network …] [--power …] …
//   bgtransfer [--container PATH] timeline [--session ID] [--output FILE]
//   bgtransfer [--container PATH] demo

let commands = """
COMMANDS:
  inspect [--json] [--session ID]   show the daemon, apps, sessions, tasks, pending events and files
  log [--follow] [--session ID] [--level debug|info|notice|error]
                                    the log lines of every process (daemon, apps, extensions)
  watch [--session ID] [--once]     live progress of every running transfer (plain lines
                                    when stdout is not a terminal; --once: list and exit)
  conditions [--network wifi|cellular|offline] [--expensive on|off] [--constrained on|off]
             [--power charging|battery] [--low-power on|off]
                                    the simulated device conditions (printed without options);
                                    a running daemon obeys them at once
  timeline [--session ID] [--output FILE]
                                    one self-contained HTML page: every process, task, wait
                                    (and why), relaunch and acknowledgement (stdout by default)
  demo                              a background download from an extension, end to end
  force-quit BUNDLE_ID              the user's force quit: cancel the app's transfers, no relaunch
                                    until the user launches it again (S4.2)
"""
let usage = CommandLineUsage(program: "bgtransfer", forms: ["[--container PATH] <command> [options]"], details: commands,
                             summary: "look into a BackgroundTransfer container, change its device conditions, run the demo")
usage.helpIfAsked(Array(CommandLine.arguments.dropFirst()))

var arguments = Array(CommandLine.arguments.dropFirst())
let layout: ContainerLayout
do { layout = try ContainerLayout.resolve(arguments: &arguments) } catch { Tool.fail("\(error)", status: 64) }

// Every command but the demo (which makes the embedded container) reads a container that
// exists: a path that is missing, or not a folder, is an error naming it, not "(none)".
let commandNames = ["inspect", "log", "watch", "conditions", "timeline", "demo", "force-quit"]
guard let command = arguments.first else { Tool.fail("missing command: \(commandNames.joined(separator: ", "))", status: 64) }
guard commandNames.contains(command) else { Tool.fail(CommandLineUsage.unknown(command, what: "command"), status: 64) }
if command != "demo" { Tool.requireContainer(layout) }

switch command {
case "inspect":
    Inspect.run(layout: layout, arguments: Array(arguments.dropFirst()))
case "log":
    LogCommand.run(layout: layout, arguments: Array(arguments.dropFirst()))
case "watch":
    Watch.run(layout: layout, arguments: Array(arguments.dropFirst()))
case "conditions":
    ConditionsCommand.run(layout: layout, arguments: Array(arguments.dropFirst()))
case "timeline":
    TimelineCommand.run(layout: layout, arguments: Array(arguments.dropFirst()))
case "demo":
    guard arguments.count == 1 else { Tool.fail("demo takes no arguments (got \(arguments.dropFirst().joined(separator: " ")))", status: 64) }
    exit(Demo(layout: layout).run())
case "force-quit":
    guard arguments.count == 2 else { Tool.fail("force-quit needs one BUNDLE_ID", status: 64) }
    let bundle: BundleIdentifier
    do { bundle = try BundleIdentifier(arguments[1]) } catch { Tool.fail("\(error)", status: 64) }
    // Only an app that has used this container can be force-quit: a typo must not look done.
    guard ContainerSnapshot.read(layout).apps.contains(where: { $0.bundleIdentifier == bundle.rawValue || $0.containingApp == bundle.rawValue }) else {
        Tool.fail("force-quit: no app or extension \(bundle) has used the container \(layout.root.path) (see bgtransfer inspect)", status: 1)
    }
    do {
        let reply = try DaemonEndpoint.request(.forceQuit(app: bundle), as: Tool.hello, layout: layout)
        if case .forceQuitDone(let cancelled, let pids) = reply {
            print("force-quit \(bundle): \(cancelled) tasks cancelled\(pids.isEmpty ? "" : ", processes \(pids.map(String.init).joined(separator: ", ")) ended"); no relaunch until the user launches it")
        }
    } catch {
        Tool.fail("force-quit failed: \(error)", status: 1)
    }
default:
    Tool.fail(CommandLineUsage.unknown(command, what: "command"), status: 64)
}

/// Shared helpers of the tool's commands.
enum Tool {
    /// Ends the tool: status 64 is a command line it cannot understand (one line naming what,
    /// and a pointer to --help); any other, a failure naming the path or identifier at fault.
    static func fail(_ text: String, status: Int32) -> Never {
        if status == 64 { usage.usageError(text) }
        usage.fail(text, status: status)
    }

    // What this executable is entitled to: a developer tool's identity. The daemon reads this
    // very text from the executable file of the process that says hello (see `Entitlements`),
    // and lets only a tool watch every transfer, change the device conditions and force-quit any app.
    static let entitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "com.example.bgtransfer", "kind": "tool", "containingApp": "com.example.bgtransfer",
  "containingAppExecutable": "bgtransfer", "appGroups": []}]
BGTRANSFER-ENTITLEMENTS-END
"""

    /// What the tool says to the daemon before asking anything of it.
    static var hello: ClientHello {
        guard let identity = try? Entitlements.identities(inDeclaration: entitlements).first else {
            fail("the tool's own entitlements cannot be read", status: 70)
        }
        return ClientHello(identity: identity, executablePath: ProcessSpawner.currentExecutable, processName: "bgtransfer", isForeground: false)
    }

    /// Ends the tool unless the container exists and is a folder (EX_NOINPUT, naming it).
    static func requireContainer(_ layout: ContainerLayout) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: layout.root.path, isDirectory: &isDirectory) else {
            fail("no container at \(layout.root.path) (give one with --container PATH or BGTRANSFER_CONTAINER)", status: 66)
        }
        guard isDirectory.boolValue else { fail("\(layout.root.path) is not a container: it is a file, not a folder", status: 66) }
    }

    /// The directory holding this executable and its siblings (transferd, host-app, extensions).
    static var executablesDirectory: String {
        (ProcessSpawner.currentExecutable as NSString).deletingLastPathComponent
    }
}
