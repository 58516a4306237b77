import TransferContainer
import TransferPOSIX

/// Who a test says it is when it asks the daemon for what only the system does (device
/// conditions, force quit): a developer tool, as `bgtransfer` is. The daemon reads this very
/// declaration from the test executable (see `Entitlements`). A namespace; no state.
enum ToolIdentity {
    static let entitlements = """
BGTRANSFER-ENTITLEMENTS-BEGIN
[{"bundleIdentifier": "org.backgroundtransfer.testing", "kind": "tool", "containingApp": "org.backgroundtransfer.testing",
  "containingAppExecutable": "tests", "appGroups": []}]
BGTRANSFER-ENTITLEMENTS-END
"""

    static func hello() throws(TestingFailure) -> ClientHello {
        guard let identity = try? Entitlements.identities(inDeclaration: entitlements).first else {
            throw TestingFailure(expected: "the testing library's tool declaration to read", happened: "it does not parse")
        }
        return ClientHello(identity: identity, executablePath: ProcessSpawner.currentExecutable, processName: "tests", isForeground: false)
    }

    /// Sends `request` to the daemon of `layout` as the tool.
    static func request(_ request: DaemonRequest, layout: ContainerLayout, asking what: String) throws(TestingFailure) -> DaemonReply {
        do {
            return try DaemonEndpoint.request(request, as: hello(), layout: layout)
        } catch let failure as TestingFailure {
            throw failure
        } catch {
            throw TestingFailure(expected: "the daemon of \(layout.root.path) to \(what)", happened: "\(error)")
        }
    }
}
